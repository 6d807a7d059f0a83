"""Protobuf messages -> the JSON shapes the tools return (see ``schemas``)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from vera.gateway import schemas
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.retrieval.v1 import retrieval_pb2


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def ts(message: Message, field: str) -> str | None:
    """``message.<field>`` as ISO-8601 UTC text, or None when unset."""
    if not message.HasField(field):
        return None
    stamp = getattr(message, field)
    return _iso_instant(stamp.seconds, stamp.nanos)


# Converting a Timestamp to text is the costliest step of a view (a context of ten facts
# has twenty), and the same instants recur: facts ingested together share recorded_at,
# facts from one source share valid_from.
@functools.lru_cache(maxsize=16_384)
def _iso_instant(seconds: int, nanos: int) -> str | None:
    return iso(Timestamp(seconds=seconds, nanos=nanos).ToDatetime(tzinfo=UTC))


@functools.cache
def enum_name(value: int, enum_type: Any, prefix: str) -> str:
    """``FACT_STATE_ACTIVE`` -> ``active``."""
    name = enum_type.Name(value)
    return name.removeprefix(prefix).lower()


def state(value: int) -> str:
    return enum_name(value, knowledge_pb2.FactState, "FACT_STATE_")


def verification(value: int) -> str:
    return enum_name(value, knowledge_pb2.VerificationState, "VERIFICATION_STATE_")


def outcome(value: int) -> str:
    return enum_name(value, knowledge_pb2.ProposalOutcome, "PROPOSAL_OUTCOME_")


def normalize_key(name: str, prefix: str) -> str:
    """Map keys such as ``PROPOSAL_OUTCOME_CREATED`` or ``CREATED`` -> ``created``."""
    return name.removeprefix(prefix).lower()


def project(p: identity_pb2.Project) -> dict[str, Any]:
    return {
        "project_id": p.project_id,
        "slug": p.slug,
        "display_name": p.display_name,
        "kind": enum_name(p.kind, identity_pb2.ProjectKind, "PROJECT_KIND_"),
    }


def citation(c: knowledge_pb2.Citation, *, compact: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source_id": c.source_id,
        "locator": c.locator,
        "verification": verification(c.verification),
    }
    if not compact:
        out.update(title=c.title, uri=c.uri, excerpt=c.excerpt)
    return out


def fact(f: knowledge_pb2.Fact, *, compact_citations: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "fact_key": f.fact_key,
        "subject": f.subject,
        "predicate": f.predicate,
        "object": f.object,
        "state": state(f.state),
        "trust_tier": f.trust_tier,
        "authority": f.authority,
        "valid_from": ts(f, "valid_from"),
        "valid_to": ts(f, "valid_to"),
        "recorded_at": ts(f, "recorded_at"),
        "project_id": f.scope_id,
    }
    # Bindings appear only when set, so an unbound fact reads as unbound.
    for name in ("repository", "branch", "code_path", "document_type", "source_type"):
        value = getattr(f, name)
        if value:
            out[name] = value
    out["citations"] = [citation(c, compact=compact_citations) for c in f.citations]
    if f.conflicting_fact_keys:
        out["conflicting_fact_keys"] = list(f.conflicting_fact_keys)
    if f.superseded_by:
        out["superseded_by"] = f.superseded_by
    if f.corrects:
        out["corrects"] = f.corrects
    return out


def optional_fact(message: Message, field: str) -> dict[str, Any] | None:
    return fact(getattr(message, field)) if message.HasField(field) else None


def result(r: retrieval_pb2.RetrievedFact, *, compact_citations: bool = False) -> dict[str, Any]:
    out = fact(r.fact, compact_citations=compact_citations)
    out.update(
        score=r.score,
        rank=r.rank,
        result_ref=r.result_ref,
        signals=dict(sorted(r.signals.items())),
    )
    return out


def conflict(c: retrieval_pb2.Conflict) -> dict[str, Any]:
    return {"subject": c.subject, "predicate": c.predicate, "fact_keys": list(c.fact_keys)}


def freshness_warning(w: retrieval_pb2.FreshnessWarning) -> dict[str, Any]:
    return {
        "fact_key": w.fact_key,
        "source_id": w.source_id,
        "reason": w.reason,
        "observed_at": ts(w, "observed_at"),
    }


def omission(o: retrieval_pb2.Omission) -> dict[str, Any]:
    return {"fact_key": o.fact_key, "reason": o.reason}


_RETRIEVAL_MODE: dict[int, str] = {
    retrieval_pb2.RETRIEVAL_MODE_LEXICAL_ONLY: schemas.DEGRADED_MODE,
}


def retrieval_mode(mode: int) -> str:
    # Unset (a retrieval service that predates the field) is the hybrid answer it gave.
    return _RETRIEVAL_MODE.get(mode, schemas.HYBRID_MODE)


def retrieval_common(response: Any, *, compact_citations: bool = False) -> dict[str, Any]:
    """The parts shared by SearchResponse and AssembleContextResponse."""
    results = [result(r, compact_citations=compact_citations) for r in response.results]
    return {
        "results": results,
        "conflicts": [conflict(c) for c in response.conflicts],
        "freshness_warnings": [freshness_warning(w) for w in response.freshness_warnings],
        "omitted": [omission(o) for o in response.omitted],
        # Nothing found is an answer, with a reason; a reason only accompanies no results.
        "empty_reason": (response.empty_reason or "no_matching_knowledge") if not results else None,
        "retrieval_mode": retrieval_mode(response.retrieval_mode),
    }


def source(s: knowledge_pb2.Source) -> dict[str, Any]:
    return {
        "source_id": s.source_id,
        "source_type": s.source_type,
        "title": s.title,
        "uri": s.uri,
        "observed_at": ts(s, "observed_at"),
    }


def assertion(a: knowledge_pb2.Assertion) -> dict[str, Any]:
    return {
        "assertion_id": a.assertion_id,
        "supports": a.supports,
        "trust_tier": a.trust_tier,
        "authority": a.authority,
        "verification": verification(a.verification),
        "source": source(a.source) if a.HasField("source") else None,
        "evidence": [
            {"evidence_id": e.evidence_id, "text": e.text, "locator": e.locator} for e in a.evidence
        ],
        "recorded_at": ts(a, "recorded_at"),
    }


def task_context(c: knowledge_pb2.TaskContext) -> dict[str, Any]:
    return {
        "runtime": c.runtime or None,
        "session_ref": c.session_ref or None,
        "task_ref": c.task_ref or None,
        "repository_ref": c.repository_ref or None,
    }


def attempt(a: knowledge_pb2.ProposalAttempt) -> dict[str, Any]:
    return {
        "attempt_id": a.attempt_id,
        "outcome": outcome(a.outcome),
        "reason": a.reason or None,
        "fact_key": a.fact_key,
        "subject": a.subject,
        "predicate": a.predicate,
        "object": a.object,
        "fact_state": state(a.fact_state),
        "context": task_context(a.context),
        "created_at": ts(a, "created_at"),
        "superseded_by": a.superseded_by or None,
        "conflicting_fact_keys": list(a.conflicting_fact_keys),
    }
