"""What a vector index stores and filters by, in no engine's types: point ids, payloads and
the filter of an IndexQuery. qdrant.py and edge.py translate them, so the embedded
default never imports qdrant-client (about 0.7 s of a start)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from vera.services.retrieval.domain import Fact, IndexQuery

# Point ids are uuid5(POINT_NAMESPACE, version_id): a replayed change overwrites its point.
POINT_NAMESPACE = uuid.UUID("6f1c2a8e-6c47-4a3e-9d0f-1f1b6e5f7a21")
# VERA_RETRIEVAL__QDRANT_URL for an in-memory qdrant-client (tests).
MEMORY_LOCATION = ":memory:"
# Unset bounds become sentinels so range filters need no "is null" branches.
SINCE_ALWAYS = -1.0e15
FOREVER = 1.0e15


def point_id(version_id: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, version_id))


def _epoch(value: datetime | None, default: float) -> float:
    return value.timestamp() if value is not None else default


def payload(fact: Fact) -> dict[str, object]:
    return {
        "fact_key": fact.fact_key,
        "version_id": fact.version_id,
        "scope_id": fact.scope_id,
        "state": int(fact.state),
        "predicate": fact.predicate,
        "valid_from": _epoch(fact.valid_from, SINCE_ALWAYS),
        "valid_to": _epoch(fact.valid_to, FOREVER),
        "recorded_at": _epoch(fact.recorded_at, SINCE_ALWAYS),
        "superseded_at": _epoch(fact.superseded_at, FOREVER),
        "document_type": fact.document_type,
        "source_type": fact.source_type,
        "trust_tier": fact.trust_tier,
        "authority": fact.authority,
    }


@dataclass(frozen=True)
class Condition:
    """One payload condition: ``key`` matches any of ``any``, equals ``value``, or lies in
    the numeric range the bounds give."""

    key: str
    any: list[str] | list[int] | None = None
    value: str | None = None
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


def conditions(query: IndexQuery) -> tuple[list[Condition], list[Condition]]:
    """(must, must not) of the query's scope, state, valid and transaction time and
    attribute filters."""
    as_of = query.as_of.timestamp()
    must = [
        Condition("scope_id", any=list(query.scope_ids)),
        Condition("state", any=[int(s) for s in query.states]),
        Condition("valid_from", lte=as_of),
        Condition("valid_to", gt=as_of),
    ]
    if query.known_as_of is not None:
        known = query.known_as_of.timestamp()
        must.append(Condition("recorded_at", lte=known))
        must.append(Condition("superseded_at", gt=known))
    if query.document_type:
        must.append(Condition("document_type", value=query.document_type))
    if query.source_type:
        must.append(Condition("source_type", value=query.source_type))
    if query.include_predicates:
        must.append(Condition("predicate", any=list(query.include_predicates)))
    if query.min_authority is not None:
        must.append(Condition("authority", gte=query.min_authority))
    if query.max_trust_tier is not None:
        must.append(Condition("trust_tier", lte=query.max_trust_tier))
    must_not = []
    if query.exclude_predicates:
        must_not.append(Condition("predicate", any=list(query.exclude_predicates)))
    return must, must_not
