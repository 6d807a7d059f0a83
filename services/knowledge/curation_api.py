"""The curation RPCs of KnowledgeService: proto <-> curation rules, nothing else.

One RPC group of ``api.KnowledgeApi``; the REST API (never MCP) calls these after
it has authorized the curator against identity.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from vera import page_tokens, request_fields
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.rpc.timestamps import to_timestamp

from . import convert, curation, domain, graph
from .curation import PendingSource
from .curation_store import CurationStore
from .drift_store import DRIFT_REASONS, MAX_MARKS, PAGE_DEFAULT, PAGE_MAX, DriftMark, DriftStore


class CurationRpcs:
    _curation: CurationStore
    _drift: DriftStore
    _stale_days: int

    async def ListCitedLines(
        self, request: pb.ListCitedLinesRequest, context
    ) -> pb.ListCitedLinesResponse:
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        prefix = domain.require_text("source_id_prefix", request.source_id_prefix, domain.MAX_ID)
        size = request_fields.page_size(request.page_size, default=PAGE_DEFAULT, maximum=PAGE_MAX)
        offset = page_tokens.decode_position(request.page_token)
        rows, next_token = await self._drift.cited_lines(
            scope, prefix, request.drifted_only, size, offset
        )
        return pb.ListCitedLinesResponse(
            cited=[
                pb.CitedLines(
                    fact_key=r.fact_key, source_id=r.source_id, locator=r.locator,
                    evidence=r.evidence, subject=r.subject, predicate=r.predicate,
                    object=r.object, drift_reason=r.drift_reason, drift_commit=r.drift_commit,
                    drift_detected_at=to_timestamp(r.drift_detected_at),
                )
                for r in rows
            ],
            next_page_token=next_token,
        )  # fmt: skip

    async def RecordCitationDrift(
        self, request: pb.RecordCitationDriftRequest, context
    ) -> pb.RecordCitationDriftResponse:
        curator = request_fields.parse_uuid("curator_principal_id", request.curator_principal_id)
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        commit = domain.require_text("commit", request.commit, domain.MAX_ID)
        if not 1 <= len(request.drift) <= MAX_MARKS:
            raise InvalidInput("drift", f"1..{MAX_MARKS} citations", reason="out_of_range")
        marks = []
        for i, d in enumerate(request.drift):
            if d.reason and d.reason not in DRIFT_REASONS:
                raise InvalidInput(f"drift[{i}].reason", "lines_changed, lines_vanished or "
                                   "empty", reason="invalid")
            marks.append(DriftMark(
                domain.require_text(f"drift[{i}].fact_key", d.fact_key, domain.MAX_ID),
                domain.require_text(f"drift[{i}].source_id", d.source_id, domain.MAX_ID),
                d.reason))
        marked, cleared = await self._drift.record(curator, scope, commit, marks)
        return pb.RecordCitationDriftResponse(marked=marked, cleared=cleared)  # fmt: skip

    async def ListPendingProposals(
        self, request: pb.ListPendingProposalsRequest, context
    ) -> pb.ListPendingProposalsResponse:
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        size = request_fields.page_size(
            request.page_size,
            default=curation.PENDING_PAGE_DEFAULT,
            maximum=curation.PENDING_PAGE_MAX,
        )
        after = page_tokens.decode_position(request.page_token)
        page = await self._curation.list_pending(scope, size, after)
        return pb.ListPendingProposalsResponse(
            proposals=[
                pb.PendingProposal(
                    fact_key=p.fact_key,
                    version_id=str(p.version_id),
                    proposer_principal_id=str(p.proposer_id) if p.proposer_id else "",
                    subject=p.subject,
                    predicate=p.predicate,
                    object=p.object,
                    evidence=list(p.evidence),
                    context=convert.task_context_to_proto(p.context),
                    proposed_at=to_timestamp(p.proposed_at),
                    conflicting_fact_keys=list(p.conflicting_fact_keys),
                    known_fact_key=p.known_fact_key,
                    branch=p.location.branch,
                    code_path=p.location.code_path,
                    repository=p.repository,
                    **_cited(p.source),
                )
                for p in page.proposals
            ],
            next_page_token=page.next_page_token,
            total=page.total.count,
            total_is_lower_bound=page.total.lower_bound,
        )

    async def ListConflictedAttempts(
        self, request: pb.ListConflictedAttemptsRequest, context
    ) -> pb.ListConflictedAttemptsResponse:
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        size = request_fields.page_size(
            request.page_size,
            default=curation.PENDING_PAGE_DEFAULT,
            maximum=curation.PENDING_PAGE_MAX,
        )
        before = page_tokens.decode_position(request.page_token)
        page = await self._curation.list_conflicted(scope, size, before)
        return pb.ListConflictedAttemptsResponse(
            attempts=[
                pb.ConflictedAttempt(
                    attempt_id=str(a.attempt_id),
                    proposer_principal_id=str(a.proposer_id),
                    subject=a.subject,
                    predicate=a.predicate,
                    object=a.object,
                    contradicted_fact_keys=list(a.contradicted_fact_keys),
                    context=convert.task_context_to_proto(a.context),
                    attempted_at=to_timestamp(a.attempted_at),
                    branch=a.location.branch,
                    code_path=a.location.code_path,
                )
                for a in page.attempts
            ],
            next_page_token=page.next_page_token,
            total=page.total.count,
            total_is_lower_bound=page.total.lower_bound,
        )

    async def VerifyProposal(
        self, request: pb.VerifyProposalRequest, context
    ) -> pb.VerifyProposalResponse:
        req = curation.make_verify(
            curator_id=request.curator_principal_id,
            scope_id=request.scope_id,
            fact_key=request.fact_key,
            trust_tier=request.trust_tier if request.HasField("trust_tier") else None,
            authority=request.authority if request.HasField("authority") else None,
            note=request.note,
        )
        result = await self._curation.verify(req)
        return pb.VerifyProposalResponse(
            fact=convert.fact_to_proto(result.fact),
            proposal=convert.fact_to_proto(result.proposal),
            already_active=result.already_active,
            change_position=result.change_position,
        )

    async def GetCurationSettings(
        self, request: pb.GetCurationSettingsRequest, context
    ) -> pb.GetCurationSettingsResponse:
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        return pb.GetCurationSettingsResponse(
            settings=_settings_to_proto(await self._curation.settings(scope)))

    async def SetCurationSettings(
        self, request: pb.SetCurationSettingsRequest, context
    ) -> pb.SetCurationSettingsResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        settings = curation.CurationSettings(
            two_person_verification=request.settings.two_person_verification)
        return pb.SetCurationSettingsResponse(settings=_settings_to_proto(
            await self._curation.set_settings(principal, scope, settings)))

    async def RejectProposal(
        self, request: pb.RejectProposalRequest, context
    ) -> pb.RejectProposalResponse:
        req = curation.make_reject(
            curator_id=request.curator_principal_id,
            scope_id=request.scope_id,
            fact_key=request.fact_key,
            reason=request.reason,
        )
        result = await self._curation.reject(req)
        return pb.RejectProposalResponse(
            proposal=convert.fact_to_proto(result.proposal),
            change_position=result.change_position,
        )

    async def RetractSource(
        self, request: pb.RetractSourceRequest, context
    ) -> pb.RetractSourceResponse:
        req = curation.make_retract_source(
            curator_id=request.curator_principal_id,
            scope_id=request.scope_id,
            source_id=request.source_id,
            reason=request.reason,
            validate_only=request.validate_only,
        )
        result = await self._curation.retract_source(req)
        return pb.RetractSourceResponse(
            status=(
                pb.RETRACTION_STATUS_ALREADY_RETRACTED
                if result.already_retracted
                else pb.RETRACTION_STATUS_RETRACTED
            ),
            assertions_withdrawn=result.assertions_withdrawn,
            retracted_fact_keys=list(result.retracted_fact_keys),
            still_supported_fact_keys=list(result.still_supported_fact_keys),
            audit_event_id=str(result.audit_event_id) if result.audit_event_id else "",
            change_position=result.change_position,
        )

    async def ListSources(
        self, request: pb.ListSourcesRequest, context
    ) -> pb.ListSourcesResponse:
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        size = request_fields.page_size(
            request.page_size,
            default=curation.PENDING_PAGE_DEFAULT,
            maximum=curation.PENDING_PAGE_MAX,
        )
        offset = page_tokens.decode_position(request.page_token)
        page = await self._curation.list_sources(scope, size, offset)
        now = datetime.now(UTC)
        summaries = []
        for s in page.sources:
            fresh = graph.freshness(s.observed_at, now, self._stale_days)
            summary = pb.SourceSummary(
                source=pb.Source(
                    source_id=s.source_id,
                    source_type=s.source_type,
                    title=s.title,
                    uri=s.uri,
                    observed_at=to_timestamp(s.observed_at),
                ),
                freshness=pb.SourceFreshness(
                    stale=fresh.stale,
                    age_days=fresh.age_days,
                    stale_after_days=fresh.stale_after_days,
                    reason=fresh.reason,
                ),
                cited_by_facts=s.cited_by_facts,
            )
            if s.retracted_at is not None:
                summary.retracted_at.CopyFrom(to_timestamp(s.retracted_at))
            summaries.append(summary)
        return pb.ListSourcesResponse(
            sources=summaries,
            next_page_token=page.next_page_token,
            total=page.total.count,
            total_is_lower_bound=page.total.lower_bound,
        )


def _settings_to_proto(settings: curation.CurationSettings) -> pb.CurationSettings:
    return pb.CurationSettings(two_person_verification=settings.two_person_verification)


def _cited(source: PendingSource | None) -> dict[str, Any]:
    """A pending proposal's source fields (none for a proposal that cites none)."""
    if source is None:
        return {}
    cited: dict[str, Any] = {"source_id": source.source_id, "locator": source.locator,
                             "source_uri": source.uri}
    if source.observed_at is not None:
        cited["source_observed_at"] = to_timestamp(source.observed_at)
    return cited
