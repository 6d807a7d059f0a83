"""The fact RPCs of KnowledgeService (ingest, reads, proposals, feedback, the change log):
proto <-> domain translation and nothing else."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from vera import page_tokens, request_fields, secret_screen
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.rpc.timestamps import from_timestamp, to_timestamp

from . import convert, domain, feedback, ingest, proposals
from .bulk_proposal_store import BulkProposalStore
from .feedback_store import FeedbackStore
from .ingest_store import IngestStore
from .policy import policy_for
from .proposal_store import ProposalStore
from .store import KnowledgeStore

if TYPE_CHECKING:
    from vera.db.notify import ChannelWatch

# A long poll answers this long before the call's deadline, so the answer arrives in time.
DEADLINE_MARGIN_SECONDS = 0.5

MAX_KEYS_PER_BATCH = 1000


def _fact_keys(field_name: str, keys: list[str]) -> list[str]:
    if len(keys) > MAX_KEYS_PER_BATCH:
        raise InvalidInput(field_name, f"at most {MAX_KEYS_PER_BATCH}", reason="too_many")
    return [k.strip() for k in keys]


class FactRpcs:
    """The RPCs over facts, proposals and feedback; one group of ``api.KnowledgeApi``."""

    _store: KnowledgeStore
    _ingest: IngestStore
    _bulk_proposals: BulkProposalStore
    _proposals: ProposalStore
    _feedback: FeedbackStore
    _changes: ChannelWatch

    async def IngestKnowledge(
        self, request: pb.IngestKnowledgeRequest, context
    ) -> pb.IngestKnowledgeResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        sources = tuple(
            ingest.validate_source(
                i,
                ingest.SourceIn(
                    source_id=s.source_id,
                    source_type=s.source_type,
                    title=s.title,
                    uri=s.uri,
                    observed_at=from_timestamp(s, "observed_at", f"sources[{i}].observed_at"),
                ),
            )
            for i, s in enumerate(request.sources)
        )
        entities = tuple(
            ingest.validate_entity(i, e.name, list(e.aliases), e.kind)
            for i, e in enumerate(request.entities)
        )
        facts = tuple(
            convert.fact_input(i, scope, f, f"facts[{i}]") for i, f in enumerate(request.facts)
        )
        batch = ingest.IngestBatch(principal, scope, sources, entities, facts)
        if request.validate_only:
            if len(request.corrected_fact_keys) > domain.MAX_BATCH:
                raise InvalidInput("corrected_fact_keys", f"at most {domain.MAX_BATCH}",
                                   reason="too_many")
            await self._ingest.check(batch, [
                domain.require_text(f"corrected_fact_keys[{i}]", key, domain.MAX_ID)
                for i, key in enumerate(request.corrected_fact_keys)])
            return pb.IngestKnowledgeResponse()
        result = await self._ingest.ingest(batch)
        return pb.IngestKnowledgeResponse(
            sources=convert.counts_to_proto(result.sources),
            entities=convert.counts_to_proto(result.entities),
            facts=convert.counts_to_proto(result.facts),
            change_position=result.change_position,
            warnings=[convert.warning_to_proto(w) for w in ingest.ingest_warnings(batch)],
            fact_keys=[f.fact_key for f in facts],
        )

    async def BatchGetFacts(
        self, request: pb.BatchGetFactsRequest, context
    ) -> pb.BatchGetFactsResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        keys = _fact_keys("fact_keys", list(request.fact_keys))
        views = await self._store.batch_get_facts(
            scopes,
            keys,
            from_timestamp(request, "as_of"),
            from_timestamp(request, "known_as_of"),
        )
        return pb.BatchGetFactsResponse(facts=[convert.fact_to_proto(v) for v in views])

    async def ExplainFact(self, request: pb.ExplainFactRequest, context) -> pb.ExplainFactResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        key = domain.require_text("fact_key", request.fact_key, domain.MAX_ID)
        found = await self._store.explain_fact(
            scopes, key, from_timestamp(request, "as_of"), from_timestamp(request, "known_as_of")
        )
        if found is None:
            raise InvalidInput("fact_key", "no such fact in scope", reason="not_found")
        view, assertions = found
        return pb.ExplainFactResponse(
            fact=convert.fact_to_proto(view),
            assertions=[convert.assertion_to_proto(a) for a in assertions],
        )

    async def ProposeFact(self, request: pb.ProposeFactRequest, context) -> pb.ProposeFactResponse:
        proposal = proposals.make_proposal(
            principal_id=request.principal_id,
            personal_scope_id=request.personal_scope_id,
            readable_scope_ids=list(request.readable_scope_ids),
            subject=request.subject,
            predicate=request.predicate,
            object_=request.object,
            evidence_text=request.evidence_text,
            context=convert.task_context(request.context),
            target_scope_id=request.target_scope_id,
            context_as_sent=convert.task_context_as_sent(request.context),
            location=domain.ProposalLocation.normalized(request.branch, request.code_path),
        )
        try:
            # Pattern matching over up to ~10 KiB of text: CPU work, kept off the loop.
            await asyncio.to_thread(policy_for(self._store.ontology).check, proposal)
        except InvalidInput as refusal:
            # Every call appends an attempt: a refused one without the refused text.
            await self._proposals.record_refusal(
                proposal, refusal.field, refusal.metadata.get("reason", "")
            )
            raise
        result = await self._proposals.propose(proposal)
        return pb.ProposeFactResponse(
            attempt_id=str(result.attempt_id),
            outcome=convert.OUTCOMES[result.decision.outcome],
            fact=convert.fact_to_proto(result.fact) if result.fact is not None else None,
            reason=result.decision.reason,
            conflicting_fact_keys=list(result.decision.conflicting_fact_keys),
        )

    async def ProposeFacts(
        self, request: pb.ProposeFactsRequest, context
    ) -> pb.ProposeFactsResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        personal = request_fields.parse_uuid("personal_scope_id", request.personal_scope_id)
        target = request_fields.parse_uuid("target_scope_id", request.target_scope_id)
        if not request.facts or len(request.sources) + len(request.facts) > domain.MAX_BATCH:
            raise InvalidInput("facts", f"1..{domain.MAX_BATCH} records", reason="out_of_range")
        sources = tuple(
            ingest.validate_source(i, ingest.SourceIn(
                source_id=s.source_id, source_type=s.source_type, title=s.title, uri=s.uri,
                observed_at=from_timestamp(s, "observed_at", f"sources[{i}].observed_at")))
            for i, s in enumerate(request.sources)
        )  # fmt: skip
        policy = policy_for(self._store.ontology)
        facts: list[ingest.FactIn | None] = []
        unknown: set[str] = set()
        for i, message in enumerate(request.facts):
            fact = convert.fact_input(i, personal, message, f"facts[{i}]")
            if not policy.is_allowed(fact.predicate):
                # Named and left out, never stated under another predicate.
                unknown.add(fact.predicate)
                facts.append(None)
                continue
            await asyncio.to_thread(secret_screen.screen, (
                (f"facts[{i}].subject", fact.subject), (f"facts[{i}].object", fact.object),
                (f"facts[{i}].evidence", fact.evidence)))  # fmt: skip
            facts.append(fact)
        result = await self._bulk_proposals.propose(principal, personal, target, sources, facts)
        return pb.ProposeFactsResponse(
            fact_keys=result.fact_keys, created=result.created,
            deduplicated=result.deduplicated, unknown_predicates=sorted(unknown),
            change_position=result.change_position,
        )  # fmt: skip

    async def RetractProposal(
        self, request: pb.RetractProposalRequest, context
    ) -> pb.RetractProposalResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        scope = request_fields.parse_uuid("personal_scope_id", request.personal_scope_id)
        key = domain.require_text("fact_key", request.fact_key, domain.MAX_ID)
        status, view = await self._proposals.retract(principal, scope, key)
        return pb.RetractProposalResponse(
            status=convert.RETRACTION[status], fact=convert.fact_to_proto(view)
        )

    async def GetProposalReport(
        self, request: pb.GetProposalReportRequest, context
    ) -> pb.GetProposalReportResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        ctx = convert.task_context(request.context)
        if ctx.is_empty():
            raise InvalidInput("context", "at least one context field", reason="required")
        size = request_fields.page_size(
            request.page_size, default=domain.REPORT_PAGE_DEFAULT, maximum=domain.REPORT_PAGE_MAX
        )
        after = page_tokens.decode_position(request.page_token)
        report = await self._proposals.proposal_report(principal, ctx, size, after)
        return pb.GetProposalReportResponse(
            attempts=[convert.attempt_to_proto(a) for a in report.attempts],
            next_page_token=report.next_page_token,
            outcome_counts=report.outcome_counts,
            state_counts=report.state_counts,
            total_attempts=report.total_attempts,
        )

    async def GetProposalPolicy(
        self, request: pb.GetProposalPolicyRequest, context
    ) -> pb.GetProposalPolicyResponse:
        ontology = self._store.ontology
        return pb.GetProposalPolicyResponse(
            allowed_predicates=sorted(policy_for(ontology).allowed_predicates),
            single_valued_predicates=sorted(ontology.single_valued_predicates),
            ontology_version=ontology.version,
        )

    async def RecordFeedback(
        self, request: pb.RecordFeedbackRequest, context
    ) -> pb.RecordFeedbackResponse:
        recorded = feedback.make_feedback(
            principal_id=request.principal_id,
            personal_scope_id=request.personal_scope_id,
            pack_id=request.pack_id,
            result_ref=request.result_ref,
            signal=request.signal,
            query=request.query,
            rank=request.rank,
            signal_vector=dict(request.signal_vector),
            fact_key=request.fact_key,
            # An unknown number is refused by the domain rather than guessed at.
            attribution=convert.FEEDBACK_ATTRIBUTIONS.get(request.attribution, "?"),
            pack_scope_id=request.pack_scope_id,
        )
        stored = await self._feedback.record_feedback(recorded)
        return pb.RecordFeedbackResponse(
            feedback_id=str(stored.feedback_id),
            signal=stored.signal,
            created=stored.created,
            recorded_at=to_timestamp(stored.recorded_at),
        )

    async def ListRankingFeedback(
        self, request: pb.ListRankingFeedbackRequest, context
    ) -> pb.ListRankingFeedbackResponse:
        scope = request_fields.optional_uuid("pack_scope_id", request.pack_scope_id)
        size = request_fields.page_size(
            request.page_size,
            default=domain.RANKING_FEEDBACK_PAGE_DEFAULT,
            maximum=domain.RANKING_FEEDBACK_PAGE_MAX,
        )
        if request.max_rows_per_principal < 0:
            raise InvalidInput("max_rows_per_principal", "must be >= 0", reason="out_of_range")
        before = page_tokens.decode_position(request.page_token) if request.page_token else None
        after = from_timestamp(request, "recorded_after")
        rows = await self._feedback.list_ranking_feedback(
            scope, after, before, size + 1, request.max_rows_per_principal or None
        )
        page, more = rows[:size], len(rows) > size
        return pb.ListRankingFeedbackResponse(
            feedback=[convert.ranking_feedback_to_proto(r) for r in page],
            next_page_token=page_tokens.encode_position(page[-1].seq) if more else "",
        )

    async def ListChanges(self, request: pb.ListChangesRequest, context) -> pb.ListChangesResponse:
        if request.after_position < 0:
            raise InvalidInput("after_position", "must be >= 0", reason="out_of_range")
        size = request_fields.page_size(
            request.page_size, default=domain.CHANGES_PAGE_DEFAULT, maximum=domain.CHANGES_PAGE_MAX
        )
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        wait = _max_wait(request, context)
        seen = self._changes.generation
        page = await self._store.list_changes(request.after_position, size, scopes)
        if not page.changes and wait > 0 and await self._changes.wait_past(seen, wait):
            page = await self._store.list_changes(request.after_position, size, scopes)
        return pb.ListChangesResponse(
            changes=[convert.change_to_proto(c) for c in page.changes],
            head_position=page.head_position,
        )


def _max_wait(request: pb.ListChangesRequest, context) -> float:
    if not request.HasField("max_wait"):
        return 0.0
    wait = request.max_wait.ToTimedelta().total_seconds()
    if not 0 <= wait <= domain.CHANGES_MAX_WAIT_SECONDS:
        raise InvalidInput(
            "max_wait", f"0..{domain.CHANGES_MAX_WAIT_SECONDS:g} seconds", reason="out_of_range"
        )
    remaining = context.time_remaining()
    if remaining is not None:
        wait = min(wait, remaining - DEADLINE_MARGIN_SECONDS)
    return wait
