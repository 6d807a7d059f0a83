"""The curation RPCs of KnowledgeService: proto <-> curation rules, nothing else.

One RPC group of ``api.KnowledgeApi``; the REST API (never MCP) calls these after
it has authorized the curator against identity.
"""

from __future__ import annotations

from datetime import UTC, datetime

from vera import page_tokens, request_fields
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb

from . import convert, curation, domain, graph
from .curation_store import CurationStore
from .domain import DriftMark
from .drift_store import DRIFT_REASONS, MAX_MARKS, PAGE_DEFAULT, PAGE_MAX, DriftStore


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
            cited=[convert.cited_lines_to_proto(r) for r in rows], next_page_token=next_token
        )

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
            proposals=[convert.pending_to_proto(p) for p in page.proposals],
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
            attempts=[convert.conflicted_to_proto(a) for a in page.attempts],
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
            settings=convert.settings_to_proto(await self._curation.settings(scope)))

    async def SetCurationSettings(
        self, request: pb.SetCurationSettingsRequest, context
    ) -> pb.SetCurationSettingsResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        settings = curation.CurationSettings(
            two_person_verification=request.settings.two_person_verification)
        return pb.SetCurationSettingsResponse(settings=convert.settings_to_proto(
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
        return pb.ListSourcesResponse(
            sources=[
                convert.source_summary_to_proto(
                    s, graph.freshness(s.observed_at, now, self._stale_days))
                for s in page.sources
            ],
            next_page_token=page.next_page_token,
            total=page.total.count,
            total_is_lower_bound=page.total.lower_bound,
        )
