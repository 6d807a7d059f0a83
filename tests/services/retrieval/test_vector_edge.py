"""The qdrant-edge shard's own configuration: a bulk load is indexed a segment at a time
and the shard is opened afresh after each build, searches over the HNSW graph's int8
copies come back with exact float32 scores, and a shard made before the index parameters
gets them when it is opened."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import numpy as np
import qdrant_edge as edge

from vera.services.retrieval import vector_edge
from vera.services.retrieval.model import Fact, IndexQuery
from vera.services.retrieval.vector_edge import EdgeVectorIndex

DIMENSIONS = 384
POINTS = 7168  # above qdrant-edge's indexing threshold (~6.6k float32 points of 384)
PAGE = 256
BARE = {
    "scope_id": edge.PayloadSchemaType.Keyword,
    "fact_key": edge.PayloadSchemaType.Keyword,
    "version_id": edge.PayloadSchemaType.Keyword,
    "predicate": edge.PayloadSchemaType.Keyword,
    "state": edge.PayloadSchemaType.Integer,
}


def facts(start: int, count: int) -> list[Fact]:
    return [Fact(f"k{i}", f"v{i}", "a", f"s{i}", "p", "o") for i in range(start, start + count)]


async def test_bulk_load_builds_the_graph_per_segment_and_rescores_exactly(tmp_path, monkeypatch):
    # A load that never pauses: only the per-segment trigger can start an optimization.
    monkeypatch.setattr(vector_edge, "SEGMENT_POINTS", 7000)
    monkeypatch.setattr(vector_edge, "OPTIMIZE_IDLE_SECONDS", 1000.0)
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((POINTS, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", DIMENSIONS)

    async def indexed() -> int:  # on the index's own thread, as every shard call
        return await index._run(lambda: index._shard.info().indexed_vectors_count)

    try:
        first = index._shard
        for start in range(0, POINTS, PAGE):
            await index.upsert(facts(start, PAGE), vectors[start : start + PAGE].tolist())
        for _ in range(600):  # the build holds the GIL, so this loop waits on it
            if await indexed() >= 7000 and index._shard is not first:
                break
            await asyncio.sleep(0.1)
        assert await indexed() >= 7000
        # Opened afresh after the build (what the build left resident is let go), with
        # every point and still writable.
        assert index._shard is not first
        assert await index.count() == POINTS
        await index.upsert(facts(POINTS, 1), [vectors[0].tolist()])
        assert await index.count() == POINTS + 1

        query = vectors[42] + 0.3 * rng.standard_normal(DIMENSIONS).astype(np.float32) / 20
        query /= np.linalg.norm(query)
        hits = await index.search(
            query.tolist(), IndexQuery(scope_ids=("a",), as_of=datetime.now(UTC)), 10
        )
        assert hits[0].version_id == "v42"
        exact = {f"v{i}": float(s) for i, s in enumerate(vectors @ query)}
        # Rescored from the float32 originals: int8 scores would be off by ~1e-3.
        assert all(abs(h.score - exact[h.version_id]) < 1e-5 for h in hits)
    finally:
        await index.close()


async def test_a_shard_from_before_gets_the_index_parameters(tmp_path):
    path = tmp_path / "vectors"
    old = edge.EdgeShard.create(
        str(path),
        edge.EdgeConfig(vectors=edge.EdgeVectorParams(size=3, distance=edge.Distance.Cosine)),
    )
    for key, _ in vector_edge._INDEXED:  # bare types, as shards were made before
        bare = BARE.get(key, edge.PayloadSchemaType.Float)
        old.update(edge.UpdateOperation.create_field_index(key, bare))
    old.close()
    index = await EdgeVectorIndex.open(path, 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        schema = index._shard.info().payload_schema
        assert schema["scope_id"].params.is_tenant
        assert schema["fact_key"].params.enable_hnsw is False
        assert schema["state"].data_type == edge.PayloadSchemaType.Integer
        assert schema["valid_from"].data_type == edge.PayloadSchemaType.Float
        hits = await index.search(
            [1.0, 0.0, 0.0], IndexQuery(scope_ids=("a",), as_of=datetime.now(UTC)), 10
        )
        assert [h.version_id for h in hits] == ["v0", "v1"]
    finally:
        await index.close()


class _SlowOptimizeShard:
    """The real shard, whose optimize waits to be let go (to ask for another meanwhile)."""

    def __init__(self, shard: edge.EdgeShard) -> None:
        self._shard = shard
        self.started = threading.Event()
        self.release = threading.Event()
        self.optimizations = 0

    def optimize(self) -> bool:
        self.optimizations += 1
        self.started.set()
        self.release.wait(10)
        return False

    def __getattr__(self, name: str):
        return getattr(self._shard, name)


async def test_an_optimization_asked_for_while_one_runs_runs_after_it(tmp_path, monkeypatch):
    monkeypatch.setattr(vector_edge, "SEGMENT_POINTS", 4)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    slow = _SlowOptimizeShard(index._shard)
    index._shard = slow
    try:
        await index.upsert(facts(0, 4), [[1.0, 0.0, 0.0]] * 4)
        assert await asyncio.to_thread(slow.started.wait, 10)
        await index.upsert(facts(4, 4), [[0.0, 1.0, 0.0]] * 4)  # the last page of a load
        slow.release.set()
        for _ in range(100):
            if slow.optimizations == 2:
                break
            await asyncio.sleep(0.05)
        assert slow.optimizations == 2
    finally:
        slow.release.set()
        index._shard = slow._shard
        await index.close()


async def test_a_shard_that_fails_to_open_again_is_retried_and_serves(tmp_path, monkeypatch):
    real = edge.EdgeShard
    loads: list[str] = []

    class FailingOnce:
        @staticmethod
        def load(*args):
            loads.append("load")
            if len(loads) == 1:
                raise OSError("the disk was busy")
            return real.load(*args)

    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        monkeypatch.setattr(edge, "EdgeShard", FailingOnce)
        monkeypatch.setattr(vector_edge.time, "sleep", lambda seconds: None)
        await index._run(index._reopen_sync)
        assert loads == ["load", "load"]
        assert await index.count() == 2
    finally:
        monkeypatch.setattr(edge, "EdgeShard", real)
        await index.close()


async def test_an_erasure_queued_behind_a_reopen_reaches_the_reopened_shard(tmp_path):
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        busy = threading.Event()
        index._executor.submit(busy.wait, 10)  # the shard's thread is busy
        reopen = index._executor.submit(index._reopen_sync)
        erasure = asyncio.ensure_future(index.delete(["v0"]))
        await asyncio.sleep(0.1)
        busy.set()
        await erasure
        assert reopen.result(10) is None
        assert await index.count() == 1
    finally:
        await index.close()
