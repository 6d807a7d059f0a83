"""Proto <-> domain conversions of KnowledgeService, shared by its RPC groups."""

from __future__ import annotations

import uuid
from datetime import datetime

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.rpc.timestamps import from_timestamp, to_timestamp

from . import domain, ingest
from .community_store import CommunityView, RunView
from .domain import AssertionView, FactState, FactView, Outcome, TaskContext, Verification
from .graph import ConflictFilter, EntityView
from .ingest import FactIn
from .proposals import RetractionStatus

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
    source = (
        pb.Source(
            source_id=a.source.source_id,
            source_type=a.source.source_type,
            title=a.source.title,
            uri=a.source.uri,
            observed_at=to_timestamp(a.source.observed_at),
        )
        if a.source is not None
        else None
    )
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
