"""Retrieval's contract <-> domain: filters in; results, conflicts, warnings, omissions
and ranking models out. Every message the servicer sends is built here."""

from __future__ import annotations

from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.timestamps import from_timestamp, to_timestamp
from vera.services.retrieval.domain import (
    Conflict,
    ConflictHandling,
    Filters,
    FreshnessWarning,
    Omission,
    Result,
    RetrievalMode,
)
from vera.services.retrieval.rank.learned import (
    CUT,
    HIT_AT,
    Figures,
    FitOutcome,
    Guard,
    NotServed,
    RankRecord,
)
from vera.services.retrieval.rank.lifecycle import Ranking
from vera.services.retrieval.sources.convert import fact_to_proto

_CONFLICT_HANDLING = {
    retrieval_pb2.CONFLICT_HANDLING_UNSPECIFIED: ConflictHandling.INCLUDE,
    retrieval_pb2.CONFLICT_HANDLING_INCLUDE: ConflictHandling.INCLUDE,
    retrieval_pb2.CONFLICT_HANDLING_EXCLUDE: ConflictHandling.EXCLUDE,
    retrieval_pb2.CONFLICT_HANDLING_ONLY: ConflictHandling.ONLY,
}


def filters_from_proto(msg: retrieval_pb2.RetrievalFilters) -> Filters:
    return Filters(
        as_of=from_timestamp(msg, "as_of"),
        known_as_of=from_timestamp(msg, "known_as_of"),
        repository=msg.repository,
        branch=msg.branch,
        code_path=msg.code_path,
        document_type=msg.document_type,
        source_type=msg.source_type,
        include_predicates=tuple(msg.include_predicates),
        exclude_predicates=tuple(msg.exclude_predicates),
        min_authority=msg.min_authority if msg.HasField("min_authority") else None,
        max_trust_tier=msg.max_trust_tier if msg.HasField("max_trust_tier") else None,
        conflict_handling=_CONFLICT_HANDLING.get(msg.conflict_handling, ConflictHandling.INCLUDE),
    )


def result_to_proto(result: Result) -> retrieval_pb2.RetrievedFact:
    return retrieval_pb2.RetrievedFact(
        fact=fact_to_proto(result.fact),
        score=result.score,
        rank=result.position,
        result_ref=result.result_ref,
        signals=result.signals,
    )


def conflict_to_proto(conflict: Conflict) -> retrieval_pb2.Conflict:
    return retrieval_pb2.Conflict(
        subject=conflict.subject, predicate=conflict.predicate, fact_keys=list(conflict.fact_keys)
    )


def warning_to_proto(warning: FreshnessWarning) -> retrieval_pb2.FreshnessWarning:
    return retrieval_pb2.FreshnessWarning(
        fact_key=warning.fact_key,
        source_id=warning.source_id,
        reason=warning.reason,
        observed_at=to_timestamp(warning.observed_at),
    )


def omission_to_proto(omission: Omission) -> retrieval_pb2.Omission:
    return retrieval_pb2.Omission(fact_key=omission.fact_key, reason=omission.reason)


_RETRIEVAL_MODE = {
    RetrievalMode.HYBRID: retrieval_pb2.RETRIEVAL_MODE_HYBRID,
    RetrievalMode.LEXICAL_ONLY: retrieval_pb2.RETRIEVAL_MODE_LEXICAL_ONLY,
}


def retrieval_mode_to_proto(mode: RetrievalMode) -> retrieval_pb2.RetrievalMode:
    return _RETRIEVAL_MODE[mode]


OUTCOMES = {
    FitOutcome.ACTIVATED: retrieval_pb2.RANK_FIT_OUTCOME_ACTIVATED,
    FitOutcome.TOO_LITTLE_FEEDBACK: retrieval_pb2.RANK_FIT_OUTCOME_TOO_LITTLE_FEEDBACK,
    FitOutcome.ONE_SIDED_FEEDBACK: retrieval_pb2.RANK_FIT_OUTCOME_ONE_SIDED_FEEDBACK,
    FitOutcome.NOT_BETTER: retrieval_pb2.RANK_FIT_OUTCOME_NOT_BETTER,
    FitOutcome.WORSE_AT_TOP: retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_TOP,
    FitOutcome.WORSE_AT_RECALL: retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_RECALL,
}
NOT_SERVED = {
    None: retrieval_pb2.RANK_NOT_SERVED_REASON_UNSPECIFIED,
    NotServed.OTHER_FEATURES: retrieval_pb2.RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES,
}


def figures_to_proto(figures: Figures) -> retrieval_pb2.RankFigures:
    return retrieval_pb2.RankFigures(
        queries=figures.queries, hit=figures.hit, recall=figures.recall, mrr=figures.mrr
    )


def guard_to_proto(guard: Guard | None) -> retrieval_pb2.RankGuard | None:
    if guard is None:
        return None
    return retrieval_pb2.RankGuard(
        switched_off_time=to_timestamp(guard.checked_at),
        model=figures_to_proto(guard.model),
        hand=figures_to_proto(guard.hand),
    )


def record_to_proto(record: RankRecord | None, ranking: Ranking) -> retrieval_pb2.RankModel | None:
    if record is None:
        return None
    return retrieval_pb2.RankModel(
        model_id=record.model_id,
        scope_id=record.scope_id or "",
        outcome=OUTCOMES[record.outcome],
        active=record.serves,
        training_rows=record.training_rows,
        training_queries=record.training_queries,
        evaluated_packs=record.evaluated_packs,
        metric=record.metric,
        model_figure=record.model_figure,
        hand_figure=record.hand_figure,
        trained_at=to_timestamp(record.trained_at),
        assembler_version=ranking.version_of(record) if record.serves else "",
        model_hit=record.model_hit,
        hand_hit=record.hand_hit,
        hit_at=HIT_AT,
        not_served_reason=NOT_SERVED[record.not_served if record.active else None],
        model_recall=record.model_recall,
        hand_recall=record.hand_recall,
        replayed_queries=record.replayed_queries or 0,
        cut=CUT,
        switched_off=guard_to_proto(record.switched_off),
    )
