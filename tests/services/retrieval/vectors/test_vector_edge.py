"""The qdrant-edge shard's own configuration and builds: a bulk load is built as it goes, in
a child process on a copy that is swapped in with the writes made meanwhile, searches over
the HNSW graph's int8 copies come back with exact float32 scores, a failed build or a crash
mid-swap leaves a whole shard, and a shard made before the index parameters gets them when
it is opened."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from datetime import UTC, datetime

import numpy as np
import pytest
import qdrant_edge as edge

from vera.services.retrieval.domain import Fact, IndexQuery
from vera.services.retrieval.vectors import edge as vector_edge
from vera.services.retrieval.vectors.edge import EdgeVectorIndex

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
        for _ in range(600):  # the child builds the copy; this process goes on
            if await indexed() >= 7000 and index._shard is not first:
                break
            await asyncio.sleep(0.1)
        assert await indexed() >= 7000
        # The built copy replaced the shard, with every point and still writable; the
        # copy's directory is gone.
        assert index._shard is not first
        assert not (tmp_path / "vectors.building").exists()
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
    for key, _ in vector_edge.PAYLOAD_INDEXES:  # bare types, as shards were made before
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


async def test_an_optimization_asked_for_while_one_runs_runs_after_it(tmp_path, monkeypatch):
    monkeypatch.setattr(vector_edge, "SEGMENT_POINTS", 4)
    started, release = threading.Event(), threading.Event()
    builds: list[int] = []

    def slow_build(self) -> None:
        builds.append(1)
        started.set()
        release.wait(10)

    monkeypatch.setattr(EdgeVectorIndex, "_build", slow_build)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 4), [[1.0, 0.0, 0.0]] * 4)
        assert await asyncio.to_thread(started.wait, 10)
        await index.upsert(facts(4, 4), [[0.0, 1.0, 0.0]] * 4)  # the last page of a load
        release.set()
        for _ in range(100):
            if len(builds) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(builds) == 2
    finally:
        release.set()
        await index.close()


class _HeldPopen(subprocess.Popen):
    """The real child, started only once the test lets it go (writes land meanwhile)."""

    started = threading.Event()
    release = threading.Event()

    def __init__(self, *args, **kwargs) -> None:
        type(self).started.set()
        type(self).release.wait(30)
        super().__init__(*args, **kwargs)


async def test_writes_made_while_a_build_runs_are_in_the_shard_it_swaps_in(tmp_path, monkeypatch):
    _HeldPopen.started.clear()
    _HeldPopen.release.clear()
    monkeypatch.setattr(vector_edge.subprocess, "Popen", _HeldPopen)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((POINTS + 3, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", DIMENSIONS)
    try:
        for start in range(0, POINTS, PAGE):
            await index.upsert(facts(start, PAGE), vectors[start : start + PAGE].tolist())
        first = index._shard
        build = asyncio.ensure_future(index.optimize())
        assert await asyncio.to_thread(_HeldPopen.started.wait, 10)  # the copy is taken
        await index.upsert(facts(POINTS, 3), vectors[POINTS:].tolist())
        await index.delete(["v7"])
        query = IndexQuery(scope_ids=("a",), as_of=datetime.now(UTC))
        assert (await index.search(vectors[POINTS + 1].tolist(), query, 1))[0].version_id == (
            f"v{POINTS + 1}"
        )
        _HeldPopen.release.set()
        await build
        assert index._shard is not first
        assert await index._run(lambda: index._shard.info().indexed_vectors_count) >= 7000
        assert await index.count() == POINTS + 2
        for i in (POINTS, POINTS + 1, POINTS + 2):
            assert (await index.search(vectors[i].tolist(), query, 1))[0].version_id == f"v{i}"
        assert "v7" not in {h.version_id for h in await index.search(vectors[7].tolist(), query, 5)}
    finally:
        _HeldPopen.release.set()
        await index.close()


class _FailingPopen(subprocess.Popen):
    def __init__(self, args, **kwargs) -> None:
        super().__init__([sys.executable, "-c", "raise SystemExit(3)"], **kwargs)


async def test_a_failed_build_leaves_the_shard_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(vector_edge.subprocess, "Popen", _FailingPopen)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        first = index._shard
        await index.optimize()
        assert index._shard is first
        assert not (tmp_path / "vectors.building").exists()
        assert index._since_copy is None  # writes are no longer kept for a copy
        await index.upsert(facts(2, 1), [[0.0, 0.0, 1.0]])
        assert await index.count() == 3
    finally:
        await index.close()


async def test_a_search_while_the_shard_is_copied_answers_without_waiting(tmp_path, monkeypatch):
    copying, release = threading.Event(), threading.Event()
    real_copy = vector_edge.shutil.copytree

    def held_copy(source, target):
        copying.set()
        release.wait(10)
        return real_copy(source, target)

    monkeypatch.setattr(vector_edge.shutil, "copytree", held_copy)
    monkeypatch.setattr(vector_edge.subprocess, "Popen", _FailingPopen)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        build = asyncio.ensure_future(index.optimize())
        assert await asyncio.to_thread(copying.wait, 10)
        query = IndexQuery(scope_ids=("a",), as_of=datetime.now(UTC))
        found = await asyncio.wait_for(index.search([1.0, 0.0, 0.0], query, 1), 5)
        assert [h.version_id for h in found] == ["v0"]
        assert not build.done()  # the copy still holds the shard's thread
        release.set()
        await build
        assert [h.version_id for h in await index.search([0.0, 1.0, 0.0], query, 1)] == ["v1"]
    finally:
        release.set()
        await index.close()


def _shard_with(path, count: int) -> None:
    shard = edge.EdgeShard.create(str(path), vector_edge.shard_config(3))
    shard.update(
        edge.UpdateOperation.upsert_points(
            [edge.Point(id=i + 1, vector=[1.0, 0.0, 0.0], payload={}) for i in range(count)]
        )
    )
    shard.close()


async def test_a_crash_between_the_swaps_renames_keeps_the_previous_shard(tmp_path):
    path = tmp_path / "vectors"
    _shard_with(tmp_path / "vectors.old", 2)  # renamed away; the copy not yet in place
    _shard_with(tmp_path / "vectors.building", 5)
    index = await EdgeVectorIndex.open(path, 3)
    try:
        assert await index.count() == 2
        assert not (tmp_path / "vectors.old").exists()
        assert not (tmp_path / "vectors.building").exists()
    finally:
        await index.close()


async def test_a_crash_after_the_swaps_renames_keeps_the_copy(tmp_path):
    _shard_with(tmp_path / "vectors", 5)  # the copy in place, the previous not yet removed
    _shard_with(tmp_path / "vectors.old", 2)
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        assert await index.count() == 5
        assert not (tmp_path / "vectors.old").exists()
    finally:
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
        await index._run(lambda: (index._shard.close(), index._load_sync()))
        assert loads == ["load", "load"]
        assert await index.count() == 2
    finally:
        monkeypatch.setattr(edge, "EdgeShard", real)
        await index.close()


async def test_an_erasure_queued_behind_a_swap_reaches_the_swapped_in_shard(tmp_path):
    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        building = tmp_path / "vectors.building"
        await index._run(index._copy_sync, building)
        busy = threading.Event()
        index._executor.submit(busy.wait, 10)  # the shard's thread is busy
        swap = index._executor.submit(index._swap_sync, building)
        erasure = asyncio.ensure_future(index.delete(["v0"]))
        await asyncio.sleep(0.1)
        busy.set()
        await erasure
        assert swap.result(10) is None
        assert await index.count() == 1
    finally:
        await index.close()


async def test_a_swap_whose_copy_fails_to_open_serves_the_shard_as_it_was(tmp_path, monkeypatch):
    """The serving shard closes before the copy opens; a copy that cannot open puts the
    shard back, with the writes made since the copy."""
    real = edge.EdgeShard

    class CopyWontOpen:
        @staticmethod
        def load(path, *args):
            if path.endswith(".building"):
                raise OSError("the copy is unreadable")
            return real.load(path, *args)

    index = await EdgeVectorIndex.open(tmp_path / "vectors", 3)
    try:
        await index.upsert(facts(0, 2), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        building = tmp_path / "vectors.building"
        await index._run(index._copy_sync, building)
        await index.upsert(facts(2, 1), [[0.0, 0.0, 1.0]])  # kept for the copy
        monkeypatch.setattr(edge, "EdgeShard", CopyWontOpen)
        with pytest.raises(OSError):
            await index._run(index._swap_sync, building)
        monkeypatch.setattr(edge, "EdgeShard", real)
        assert await index.count() == 3
        query = IndexQuery(scope_ids=("a",), as_of=datetime.now(UTC))
        assert [h.version_id for h in await index.search([0.0, 0.0, 1.0], query, 1)] == ["v2"]
    finally:
        monkeypatch.setattr(edge, "EdgeShard", real)
        await index.close()
