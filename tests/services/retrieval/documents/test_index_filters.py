"""The index adapters without the model: Qdrant in memory and PostgreSQL full text share
the same filter semantics (scope, state, valid time, transaction time, attributes)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from vera.db.migrate import migrate
from vera.db.pool import create_pool
from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.domain import Citation, Fact, FactState, IndexQuery
from vera.services.retrieval.memory.facts import FactMemory
from vera.services.retrieval.vectors.edge import EdgeVectorIndex
from vera.services.retrieval.vectors.qdrant import QdrantVectorIndex, open_client, point_id

T = datetime(2025, 1, 1, tzinfo=UTC)
NOW = T + timedelta(days=200)


def unit(angle: float) -> list[float]:
    return [math.cos(angle), math.sin(angle), 0.0]


FACTS = [
    # (fact, vector angle)
    (
        Fact(
            "owner",
            "owner-v1",
            "a",
            "payments-api",
            "owned_by",
            "the platform team",
            recorded_at=T,
            citations=(Citation(excerpt="Payments on-call rotation"),),
        ),
        0.0,
    ),
    (
        Fact(
            "owner",
            "owner-v2",
            "a",
            "payments-api",
            "owned_by",
            "the checkout team",
            recorded_at=T + timedelta(days=100),
        ),
        0.05,
    ),
    (
        Fact(
            "db",
            "db-v1",
            "a",
            "checkout",
            "uses_database",
            "PostgreSQL",
            recorded_at=T,
            document_type="adr",
            trust_tier=3,
            authority=0.4,
        ),
        0.3,
    ),
    (
        Fact(
            "old",
            "old-v1",
            "a",
            "legacy cron",
            "runs_on",
            "bare metal",
            recorded_at=T,
            valid_to=T + timedelta(days=10),
        ),
        0.1,
    ),
    (
        Fact(
            "gone",
            "gone-v1",
            "a",
            "payments-api",
            "deployed_with",
            "ssh",
            recorded_at=T,
            state=FactState.RETRACTED,
        ),
        0.02,
    ),
    (Fact("secret", "secret-v1", "b", "payments-api", "owned_by", "skunkworks"), 0.0),
]


def query(**kwargs) -> IndexQuery:
    return IndexQuery(**{"scope_ids": ("a",), "as_of": NOW, **kwargs})


# One contract suite, both VectorIndex adapters: qdrant-client (local mode; a server in
# production) and the embedded qdrant-edge HNSW shard (optimized or not).
@pytest.fixture(params=["qdrant-client", "qdrant-edge", "qdrant-edge-hnsw"])
async def vectors(request, tmp_path) -> AsyncIterator[QdrantVectorIndex]:
    if request.param == "qdrant-client":
        index = await QdrantVectorIndex.open(
            lambda: open_client(":memory:", None), "test", 3, server=False
        )
    else:
        index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    for fact, angle in FACTS:  # one at a time, as the log delivers them
        await index.upsert([fact], [unit(angle)])
    if request.param == "qdrant-edge-hnsw":
        await index.optimize()
    yield index
    await index.close()


# The lexical leg: BM25 in process over the memory (the service default) or PostgreSQL
# full text (the fallback); the same filters and cursor either way.
@pytest.fixture(params=["memory", "postgres"])
async def lexical(request, pg_dsn) -> AsyncIterator[DocumentIndex]:
    await migrate(pg_dsn, "retrieval", "vera.services.retrieval")
    pool = await create_pool(pg_dsn, "retrieval", min_size=1, max_size=2)
    memory = FactMemory(3) if request.param == "memory" else None
    index = DocumentIndex(pool, memory)
    for position, (fact, angle) in enumerate(FACTS, start=1):
        await index.apply([fact], position, vectors=[unit(angle)])
    yield index
    await index.close()
    await pool.close()


async def test_vector_filters(vectors: QdrantVectorIndex):
    hits = await vectors.search(unit(0.0), query(), 10)
    # owner-v1 was superseded by owner-v2; "old" is no longer valid; "gone" is retracted;
    # "secret" lives in another scope.
    assert [h.version_id for h in hits] == ["owner-v2", "db-v1"]
    assert hits[0].score == pytest.approx(math.cos(0.05), abs=1e-5)

    past = await vectors.search(unit(0.0), query(as_of=T, known_as_of=T + timedelta(days=1)), 10)
    # Back then owner-v1 was current and "old" valid; a retraction carries no end time, so
    # a transaction-time read keeps "gone" and leaves it to the authoritative re-read.
    assert [h.version_id for h in past] == ["owner-v1", "gone-v1", "old-v1", "db-v1"]

    adr = await vectors.search(unit(0.0), query(document_type="adr"), 10)
    assert [h.version_id for h in adr] == ["db-v1"]
    assert await vectors.search(unit(0.0), query(max_trust_tier=2), 10) == [
        (await vectors.search(unit(0.0), query(), 1))[0]
    ]
    assert [h.fact_key for h in await vectors.search(unit(0.0), query(min_authority=0.1), 10)] == [
        "db"
    ]
    excluded = await vectors.search(unit(0.0), query(exclude_predicates=("owned_by",)), 10)
    assert [h.fact_key for h in excluded] == ["db"]
    assert await vectors.count() == len(FACTS)


async def test_vector_upsert_is_idempotent(vectors: QdrantVectorIndex):
    fact, angle = FACTS[2]
    await vectors.upsert([fact], [unit(angle)])
    assert await vectors.count() == len(FACTS)
    assert point_id("db-v1") == point_id("db-v1") != point_id("db-v2")


async def test_lexical_or_query_and_filters(lexical: DocumentIndex):
    hits = await lexical.search("who is on call for payments?", query(), 10)
    assert [h.version_id for h in hits] == ["owner-v2"]  # v1 (with the evidence) superseded
    hits = await lexical.search(
        "who is on call for payments?", query(as_of=T, known_as_of=T + timedelta(days=1)), 10
    )
    assert hits[0].version_id == "owner-v1"  # subject and evidence both match
    assert await lexical.search("the of and", query(), 10) == []  # stop words only
    assert await lexical.search("skunkworks", query(), 10) == []
    assert [h.fact_key for h in await lexical.search("skunkworks", query(scope_ids=("b",)), 10)]
    assert [h.fact_key for h in await lexical.search("database it's", query(), 10)] == ["db"]
    assert await lexical.search("database", query(document_type="runbook"), 10) == []


async def test_lexical_presence_and_cursor(lexical: DocumentIndex):
    assert await lexical.cursor() == len(FACTS)
    assert await lexical.has_documents(query(), with_attributes=False)
    assert not await lexical.has_documents(query(scope_ids=("nope",)), with_attributes=False)
    assert not await lexical.has_documents(query(source_type="wiki"), with_attributes=True)
    assert await lexical.has_documents(query(source_type="wiki"), with_attributes=False)
    fact, _ = FACTS[0]
    await lexical.apply([fact], 99)  # replay: idempotent
    assert await lexical.cursor() == 99


async def test_lexical_records_the_embedding_a_replay_restarts_for(lexical: DocumentIndex):
    await lexical.restart_for_embedding("minilm-l6-v2-int8")
    assert await lexical.indexed_embedding() == "minilm-l6-v2-int8"
    assert await lexical.cursor() == 0  # the tailer replays every version from here
    assert await lexical.has_documents(query(), with_attributes=False)  # kept meanwhile
