"""Proto <-> domain conversions of KnowledgeService: every message its RPC groups send
or read is built here; a group builds only its responses, from these."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.rpc.timestamps import from_timestamp, to_timestamp

from . import domain, ingest
from .curation import ConflictedView, CurationSettings, PendingSource, PendingView, SourceRow
from .domain import (
    AssertionView,
    ChangeView,
    CitedLinesRow,
    CommunityView,
    ConflictGroupView,
    Edge,
    FactState,
    FactVersionView,
    FactView,
    Outcome,
    RunView,
    ScopeChangeView,
    SourceView,
    TaskContext,
    Verification,
)
from .feedback import RankingFeedbackRow
from .graph import ConflictFilter, EntityView, Freshness, SourceVersionView
from .ingest import Counts, FactIn, IngestWarning
from .proposals import AttemptView, RetractionStatus

FACT_STATES = {
    FactState.PROPOSED: pb.FACT_STATE_PROPOSED,
    FactState.ACTIVE: pb.FACT_STATE_ACTIVE,
    FactState.DISPUTED: pb.FACT_STATE_DISPUTED,
    FactState.RETRACTED: pb.FACT_STATE_RETRACTED,
    FactState.SUPERSEDED: pb.FACT_STATE_SUPERSEDED,
}
VERIFICATION = {
    Verification.VERIFIED: pb.VERIFICATION_STATE_VERIFIED,
    Verification.UNVERIFIED: pb.VERIFICATION_STATE_UNVERIFIED,
    Verification.WITHDRAWN: pb.VERIFICATION_STATE_WITHDRAWN,
}
OUTCOMES = {
    Outcome.CREATED: pb.PROPOSAL_OUTCOME_CREATED,
    Outcome.DEDUPLICATED: pb.PROPOSAL_OUTCOME_DEDUPLICATED,
    Outcome.SKIPPED: pb.PROPOSAL_OUTCOME_SKIPPED,
    Outcome.CONFLICTED: pb.PROPOSAL_OUTCOME_CONFLICTED,
    Outcome.REJECTED: pb.PROPOSAL_OUTCOME_REJECTED,
}
RETRACTION = {
    RetractionStatus.RETRACTED: pb.RETRACTION_STATUS_RETRACTED,
    RetractionStatus.ALREADY_RETRACTED: pb.RETRACTION_STATUS_ALREADY_RETRACTED,
}
CHANGE_KINDS = {
    domain.ChangeKind.FACT_UPSERTED: pb.CHANGE_KIND_FACT_UPSERTED,
    domain.ChangeKind.SOURCE_UPSERTED: pb.CHANGE_KIND_SOURCE_UPSERTED,
    domain.ChangeKind.FEEDBACK_RECORDED: pb.CHANGE_KIND_FEEDBACK_RECORDED,
    domain.ChangeKind.FACT_ERASED: pb.CHANGE_KIND_FACT_ERASED,
}
FEEDBACK_ATTRIBUTIONS = {
    pb.FEEDBACK_ATTRIBUTION_UNSPECIFIED: domain.FEEDBACK_UNATTRIBUTED,
    pb.FEEDBACK_ATTRIBUTION_RESULT: domain.FEEDBACK_RESULT,
    pb.FEEDBACK_ATTRIBUTION_PACK: domain.FEEDBACK_PACK,
    pb.FEEDBACK_ATTRIBUTION_UNATTRIBUTED: domain.FEEDBACK_UNATTRIBUTED,
}


def fact_input(index: int, scope: uuid.UUID, message: pb.FactInput, path: str = "") -> FactIn:
    """One ``FactInput``, validated as the ``index``-th fact of ``scope``; a bad timestamp
    names ``<path>.valid_from`` / ``<path>.valid_to`` (the bare field without ``path``)."""

    def moment(field: str) -> datetime | None:
        return from_timestamp(message, field, f"{path}.{field}" if path else "")

    return ingest.validate_fact(
        index,
        scope,
        subject=message.subject,
        predicate=message.predicate,
        object_=message.object,
        source_id=message.source_id,
        evidence=message.evidence,
        locator=message.locator,
        valid_from=moment("valid_from"),
        valid_to=moment("valid_to"),
        trust_tier=message.trust_tier if message.HasField("trust_tier") else None,
        authority=message.authority if message.HasField("authority") else None,
        repository=message.repository,
        branch=message.branch,
        code_path=message.code_path,
        document_type=message.document_type,
    )


def fact_to_proto(view: FactView) -> pb.Fact:
    return pb.Fact(
        fact_key=view.fact_key,
        version_id=str(view.version_id),
        scope_id=str(view.scope_id),
        subject=view.subject,
        predicate=view.predicate,
        object=view.object,
        state=FACT_STATES[view.state],
        trust_tier=view.trust_tier,
        authority=view.authority,
        valid_from=to_timestamp(view.valid_from),
        valid_to=to_timestamp(view.valid_to),
        recorded_at=to_timestamp(view.recorded_at),
        superseded_at=to_timestamp(view.superseded_at),
        repository=view.repository,
        branch=view.branch,
        code_path=view.code_path,
        document_type=view.document_type,
        source_type=view.source_type,
        citations=[
            pb.Citation(
                source_id=c.source_id,
                locator=c.locator,
                title=c.title,
                uri=c.uri,
                excerpt=c.excerpt,
                verification=VERIFICATION[c.verification],
                source_type=c.source_type,
                observed_at=to_timestamp(c.observed_at),
                stale=c.stale,
                stale_reason=c.stale_reason,
            )
            for c in view.citations
        ],
        conflicting_fact_keys=list(view.conflicting_fact_keys),
        superseded_by=view.superseded_by,
        corrects=view.corrects,
    )


def assertion_to_proto(a: AssertionView) -> pb.Assertion:
    source = source_to_proto(a.source) if a.source is not None else None
    return pb.Assertion(
        assertion_id=str(a.assertion_id),
        supports=a.supports,
        trust_tier=a.trust_tier,
        authority=a.authority,
        verification=VERIFICATION[a.verification],
        source=source,
        evidence=[
            pb.Evidence(evidence_id=str(e.evidence_id), text=e.text, locator=e.locator)
            for e in a.evidence
        ],
        recorded_at=to_timestamp(a.recorded_at),
    )


def task_context(message: pb.TaskContext) -> TaskContext:
    return TaskContext.normalized(
        message.runtime, message.session_ref, message.task_ref, message.repository_ref
    )


def task_context_as_sent(message: pb.TaskContext) -> TaskContext:
    """The caller's task identity unnormalized, only for screening it (never stored)."""
    return TaskContext(
        message.runtime, message.session_ref, message.task_ref, message.repository_ref
    )


def task_context_to_proto(ctx: TaskContext) -> pb.TaskContext:
    return pb.TaskContext(
        runtime=ctx.runtime,
        session_ref=ctx.session_ref,
        task_ref=ctx.task_ref,
        repository_ref=ctx.repository_ref,
    )


_CONFLICT_FILTERS: dict[int, ConflictFilter] = {
    pb.CONFLICT_FILTER_UNSPECIFIED: ConflictFilter.INCLUDE,
    pb.CONFLICT_FILTER_INCLUDE: ConflictFilter.INCLUDE,
    pb.CONFLICT_FILTER_EXCLUDE: ConflictFilter.EXCLUDE,
    pb.CONFLICT_FILTER_ONLY: ConflictFilter.ONLY,
}


def entity_to_proto(e: EntityView) -> pb.Entity:
    return pb.Entity(
        entity_id=str(e.entity_id) if e.entity_id else "",
        scope_id=str(e.scope_id) if e.scope_id else "",
        name=e.name,
        aliases=list(e.aliases),
        kind=e.kind,
    )


def run_to_proto(r: RunView) -> pb.DerivationRun:
    return pb.DerivationRun(
        run_id=str(r.run_id),
        scope_id=str(r.scope_id),
        change_position=r.change_position,
        algorithm=r.algorithm,
        seed=r.seed,
        summarizer=r.summarizer,
        fact_count=r.fact_count,
        entity_count=r.entity_count,
        created_at=to_timestamp(r.created_at),
    )


def community_to_proto(c: CommunityView) -> pb.Community:
    return pb.Community(
        community_id=str(c.community_id),
        scope_id=str(c.scope_id),
        label=c.label,
        summary=c.summary,
        entities=list(c.entities),
        authoritative=False,
        run=run_to_proto(c.run),
        fact_count=c.fact_count,
        score=c.score,
    )


def conflict_filter(value: int) -> ConflictFilter:
    if value not in _CONFLICT_FILTERS:
        raise InvalidInput("conflict_filter", "unknown", reason="out_of_range")
    return _CONFLICT_FILTERS[value]


def source_to_proto(s: SourceView | SourceRow) -> pb.Source:
    return pb.Source(
        source_id=s.source_id,
        source_type=s.source_type,
        title=s.title,
        uri=s.uri,
        observed_at=to_timestamp(s.observed_at),
    )


def freshness_to_proto(f: Freshness) -> pb.SourceFreshness:
    return pb.SourceFreshness(
        stale=f.stale, age_days=f.age_days, stale_after_days=f.stale_after_days, reason=f.reason
    )


def source_version_to_proto(v: SourceVersionView) -> pb.SourceVersion:
    return pb.SourceVersion(
        version=v.version,
        source_type=v.source_type,
        title=v.title,
        uri=v.uri,
        observed_at=to_timestamp(v.observed_at),
        recorded_at=to_timestamp(v.recorded_at),
    )


def source_summary_to_proto(s: SourceRow, fresh: Freshness) -> pb.SourceSummary:
    summary = pb.SourceSummary(
        source=source_to_proto(s),
        freshness=freshness_to_proto(fresh),
        cited_by_facts=s.cited_by_facts,
    )
    if s.retracted_at is not None:
        summary.retracted_at.CopyFrom(to_timestamp(s.retracted_at))
    return summary


def fact_version_to_proto(v: FactVersionView) -> pb.FactVersion:
    return pb.FactVersion(
        version_id=str(v.version_id),
        state=FACT_STATES[v.state],
        valid_from=to_timestamp(v.valid_from),
        valid_to=to_timestamp(v.valid_to),
        recorded_at=to_timestamp(v.recorded_at),
        superseded_at=to_timestamp(v.superseded_at),
        superseded_by=v.superseded_by,
        corrects=v.corrects,
        correction_reason=v.correction_reason,
    )


def edge_to_proto(e: Edge) -> pb.GraphEdge:
    return pb.GraphEdge(
        fact=fact_to_proto(e.fact), hop=e.hop, from_node=e.from_node, to_node=e.to_node
    )


def conflict_group_to_proto(g: ConflictGroupView) -> pb.ConflictGroup:
    return pb.ConflictGroup(
        scope_id=str(g.scope_id),
        subject=g.subject,
        predicate=g.predicate,
        facts=[fact_to_proto(f) for f in g.facts],
    )


def scope_change_to_proto(c: ScopeChangeView) -> pb.ScopeChange:
    return pb.ScopeChange(
        position=c.position,
        change=c.change,
        scope_id=str(c.scope_id),
        fact=fact_to_proto(c.fact) if c.fact is not None else None,
        source_id=c.source_id,
        created_at=to_timestamp(c.created_at),
        actor_principal_id=str(c.actor_id) if c.actor_id else "",
    )


def change_to_proto(c: ChangeView) -> pb.Change:
    return pb.Change(
        position=c.position,
        kind=CHANGE_KINDS[c.kind],
        fact=fact_to_proto(c.fact) if c.fact is not None else None,
        created_at=to_timestamp(c.created_at),
        erased_version_id=c.erased_version_id,
    )


def counts_to_proto(c: Counts) -> pb.IngestCounts:
    return pb.IngestCounts(created=c.created, deduplicated=c.deduplicated)


def warning_to_proto(w: IngestWarning) -> pb.IngestWarning:
    return pb.IngestWarning(field=w.field, reason=w.reason, codepoint=w.codepoint)


def attempt_to_proto(a: AttemptView) -> pb.ProposalAttempt:
    return pb.ProposalAttempt(
        attempt_id=str(a.attempt_id),
        outcome=OUTCOMES[a.outcome],
        reason=a.reason,
        fact_key=a.fact_key,
        subject=a.subject,
        predicate=a.predicate,
        object=a.object,
        fact_state=(
            FACT_STATES[a.fact_state] if a.fact_state is not None else pb.FACT_STATE_UNSPECIFIED
        ),
        context=task_context_to_proto(a.context),
        created_at=to_timestamp(a.created_at),
        superseded_by=a.superseded_by,
        conflicting_fact_keys=list(a.conflicting_fact_keys),
    )


def ranking_feedback_to_proto(r: RankingFeedbackRow) -> pb.RankingFeedback:
    return pb.RankingFeedback(
        feedback_id=str(r.feedback_id),
        pack_id=r.pack_id,
        query_digest=r.query_digest,
        rank=r.rank,
        signal=r.signal,
        signal_vector=r.signal_vector,
        recorded_at=to_timestamp(r.recorded_at),
        query=r.query,
        fact_key=r.fact_key,
        pack_scope_id=str(r.pack_scope_id) if r.pack_scope_id else "",
    )


def cited_lines_to_proto(r: CitedLinesRow) -> pb.CitedLines:
    return pb.CitedLines(
        fact_key=r.fact_key,
        source_id=r.source_id,
        locator=r.locator,
        evidence=r.evidence,
        subject=r.subject,
        predicate=r.predicate,
        object=r.object,
        drift_reason=r.drift_reason,
        drift_commit=r.drift_commit,
        drift_detected_at=to_timestamp(r.drift_detected_at),
    )


def pending_to_proto(p: PendingView) -> pb.PendingProposal:
    return pb.PendingProposal(
        fact_key=p.fact_key,
        version_id=str(p.version_id),
        proposer_principal_id=str(p.proposer_id) if p.proposer_id else "",
        subject=p.subject,
        predicate=p.predicate,
        object=p.object,
        evidence=list(p.evidence),
        context=task_context_to_proto(p.context),
        proposed_at=to_timestamp(p.proposed_at),
        conflicting_fact_keys=list(p.conflicting_fact_keys),
        known_fact_key=p.known_fact_key,
        branch=p.location.branch,
        code_path=p.location.code_path,
        repository=p.repository,
        **_cited(p.source),
    )


def _cited(source: PendingSource | None) -> dict[str, Any]:
    """A pending proposal's source fields (none for a proposal that cites none)."""
    if source is None:
        return {}
    cited: dict[str, Any] = {"source_id": source.source_id, "locator": source.locator,
                             "source_uri": source.uri}
    if source.observed_at is not None:
        cited["source_observed_at"] = to_timestamp(source.observed_at)
    return cited


def conflicted_to_proto(a: ConflictedView) -> pb.ConflictedAttempt:
    return pb.ConflictedAttempt(
        attempt_id=str(a.attempt_id),
        proposer_principal_id=str(a.proposer_id),
        subject=a.subject,
        predicate=a.predicate,
        object=a.object,
        contradicted_fact_keys=list(a.contradicted_fact_keys),
        context=task_context_to_proto(a.context),
        attempted_at=to_timestamp(a.attempted_at),
        branch=a.location.branch,
        code_path=a.location.code_path,
    )


def settings_to_proto(settings: CurationSettings) -> pb.CurationSettings:
    return pb.CurationSettings(two_person_verification=settings.two_person_verification)
