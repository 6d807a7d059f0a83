"""Retrieval's contract <-> domain: filters in; results, conflicts, warnings and omissions
out."""

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
