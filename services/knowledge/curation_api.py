"""The curation RPCs of KnowledgeService: proto <-> curation rules, nothing else.

One RPC group of ``api.KnowledgeServicer``; the REST API (never MCP) calls these after
it has authorized the curator against identity.
"""

from __future__ import annotations

from datetime import UTC, datetime

from vera import page_tokens
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.rpc.timestamps import to_timestamp

from . import convert, curation, domain, graph
from .curation_store import CurationStore


class CurationRpcs:
    _curation: CurationStore
    _stale_days: int

    async def ListPendingProposals(
        self, request: pb.ListPendingProposalsRequest, context
    ) -> pb.ListPendingProposalsResponse:
        scope = domain.parse_uuid("scope_id", request.scope_id)
        assert scope is not None
        size = domain.page_size(
            "page_size",
            request.page_size,
            curation.PENDING_PAGE_DEFAULT,
            curation.PENDING_PAGE_MAX,
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
        scope = domain.parse_uuid("scope_id", request.scope_id)
        assert scope is not None
        size = domain.page_size(
            "page_size",
            request.page_size,
            curation.PENDING_PAGE_DEFAULT,
            curation.PENDING_PAGE_MAX,
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
        scope = domain.parse_uuid("scope_id", request.scope_id)
        assert scope is not None
        return pb.GetCurationSettingsResponse(
            settings=_settings_to_proto(await self._curation.settings(scope)))

    async def SetCurationSettings(
        self, request: pb.SetCurationSettingsRequest, context
    ) -> pb.SetCurationSettingsResponse:
        principal = domain.parse_uuid("principal_id", request.principal_id)
        scope = domain.parse_uuid("scope_id", request.scope_id)
        assert principal is not None and scope is not None
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
        scope = domain.parse_uuid("scope_id", request.scope_id)
        assert scope is not None
        size = domain.page_size(
            "page_size",
            request.page_size,
            curation.PENDING_PAGE_DEFAULT,
            curation.PENDING_PAGE_MAX,
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
