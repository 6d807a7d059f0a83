"""Erasure in the index adapters: deleted versions leave the vector index, the documents
table and the in-process memory; what stays in the same scope stays searchable."""

from __future__ import annotations

from test_index_filters import FACTS, lexical, query, unit, vectors  # noqa: F401

from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.vectors.qdrant import QdrantVectorIndex


async def test_vector_delete(vectors: QdrantVectorIndex):  # noqa: F811
    await vectors.delete(["owner-v2", "secret-v1", "never-indexed"])
    assert await vectors.count() == len(FACTS) - 2
    assert [h.version_id for h in await vectors.search(unit(0.0), query(), 10)] == ["db-v1"]
    assert await vectors.search(unit(0.0), query(scope_ids=("b",)), 10) == []
    await vectors.delete(["owner-v2"])  # a replayed erasure is harmless
    assert await vectors.count() == len(FACTS) - 2


async def test_lexical_delete(lexical: DocumentIndex):  # noqa: F811
    await lexical.delete(["db-v1", "secret-v1"])
    assert await lexical.search("database", query(), 10) == []
    assert await lexical.search("skunkworks", query(scope_ids=("b",)), 10) == []
    # The rest of scope "a" is still there (the memory rebuilt it from documents).
    hits = await lexical.search("who is on call for payments?", query(), 10)
    assert [h.version_id for h in hits] == ["owner-v2"]
    assert not await lexical.has_documents(query(scope_ids=("b",)), with_attributes=False)
    async with lexical._pool.acquire() as conn:
        remaining = await conn.fetchval(
            "SELECT count(*) FROM documents WHERE version_id = ANY($1::text[])",
            ["db-v1", "secret-v1"])
    assert remaining == 0
    await lexical.delete(["db-v1"])  # a replayed erasure is harmless
