"""Knowledge's contract <-> retrieval's domain: the fact versions and changes retrieval reads
(and hands back inside its own results)."""

from __future__ import annotations

from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.rpc.timestamps import from_timestamp, to_timestamp
from vera.services.retrieval.domain import Change, ChangeKind, Citation, Fact, FactState


def _enum(enum_type, value: int):
    try:
        return enum_type(value)
    except ValueError:
        return enum_type(0)


def citation_from_proto(msg: knowledge_pb2.Citation) -> Citation:
    return Citation(
        source_id=msg.source_id,
        locator=msg.locator,
        title=msg.title,
        uri=msg.uri,
        excerpt=msg.excerpt,
        verification=msg.verification,
        source_type=msg.source_type,
        observed_at=from_timestamp(msg, "observed_at"),
        stale=msg.stale,
        stale_reason=msg.stale_reason,
    )


def citation_to_proto(citation: Citation) -> knowledge_pb2.Citation:
    return knowledge_pb2.Citation(
        source_id=citation.source_id,
        locator=citation.locator,
        title=citation.title,
        uri=citation.uri,
        excerpt=citation.excerpt,
        verification=citation.verification,
        source_type=citation.source_type,
        observed_at=to_timestamp(citation.observed_at),
        stale=citation.stale,
        stale_reason=citation.stale_reason,
    )


def fact_from_proto(msg: knowledge_pb2.Fact) -> Fact:
    return Fact(
        fact_key=msg.fact_key,
        version_id=msg.version_id,
        scope_id=msg.scope_id,
        subject=msg.subject,
        predicate=msg.predicate,
        object=msg.object,
        state=_enum(FactState, msg.state),
        trust_tier=msg.trust_tier,
        authority=msg.authority,
        valid_from=from_timestamp(msg, "valid_from"),
        valid_to=from_timestamp(msg, "valid_to"),
        recorded_at=from_timestamp(msg, "recorded_at"),
        superseded_at=from_timestamp(msg, "superseded_at"),
        repository=msg.repository,
        branch=msg.branch,
        code_path=msg.code_path,
        document_type=msg.document_type,
        source_type=msg.source_type,
        citations=tuple(citation_from_proto(c) for c in msg.citations),
        conflicting_fact_keys=tuple(msg.conflicting_fact_keys),
    )


def fact_to_proto(fact: Fact) -> knowledge_pb2.Fact:
    return knowledge_pb2.Fact(
        fact_key=fact.fact_key,
        version_id=fact.version_id,
        scope_id=fact.scope_id,
        subject=fact.subject,
        predicate=fact.predicate,
        object=fact.object,
        state=int(fact.state),
        trust_tier=fact.trust_tier,
        authority=fact.authority,
        valid_from=to_timestamp(fact.valid_from),
        valid_to=to_timestamp(fact.valid_to),
        recorded_at=to_timestamp(fact.recorded_at),
        superseded_at=to_timestamp(fact.superseded_at),
        repository=fact.repository,
        branch=fact.branch,
        code_path=fact.code_path,
        document_type=fact.document_type,
        source_type=fact.source_type,
        citations=[citation_to_proto(c) for c in fact.citations],
        conflicting_fact_keys=list(fact.conflicting_fact_keys),
    )


def change_from_proto(msg: knowledge_pb2.Change) -> Change:
    return Change(
        position=msg.position,
        kind=_enum(ChangeKind, msg.kind),
        fact=fact_from_proto(msg.fact) if msg.HasField("fact") else None,
        erased_version_id=msg.erased_version_id,
    )
