"""VectorIndex over qdrant-edge: one in-process HNSW shard with payload indexes and a WAL
under ``<data_dir>/vectors`` (the embedded default; a Qdrant server uses vectors/qdrant.py).

Calls block, so they run on one worker thread. New points are searchable at once (the
shard scans its unindexed segment). Building the HNSW graph (``optimize``) never runs in
this process: qdrant-edge holds the GIL for a whole optimization, which froze every
coroutine of the serving process. A build copies the shard (searches go on meanwhile,
writes wait), builds the copy in a child process (edge_build) while this one
serves and writes on, then swaps the copy in with the writes made since replayed into it
(nothing written is lost: the copy takes them before it replaces the shard). Builds start
after writes settle, and during a bulk load as points arrive. Filters and payloads are the
same as the qdrant-client adapter's (qdrant.py).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import qdrant_edge as edge

from vera.services.retrieval.domain import Candidate, Fact, FactState, IndexQuery
from vera.services.retrieval.vectors.payload import (
    FOREVER,
    Condition,
    conditions,
    payload,
    point_id,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Build once this many points arrived since the last build and writes paused. The pause
# must outlast the gap between two pages of a bulk load (~4 s): with 2 s, a 100k load
# rebuilt every 2000 points and crawled (a load is built as it goes instead, below).
OPTIMIZE_AFTER_POINTS = 2000
OPTIMIZE_IDLE_SECONDS = 10.0
# A shard that fails to open again after a build is retried this many times, 1 s, 2 s, ...
# apart (until it opens, searches fall back to the lexical leg and writes are retried).
REOPEN_ATTEMPTS = 5
# During a bulk load a build starts each time this many points arrived, or as many as the
# shard held at the last build when that is more: each build copies the whole shard, so
# the copies of a load add up to a few times the shard instead of growing with its square,
# and the unindexed share a search scans stays at most about half.
SEGMENT_POINTS = 20_000
# A build merges the shard into this many segments. A search walks every segment's graph:
# at 100k points, 6 segments of ~17k (what per-segment builds left) searched in 8.8 ms
# p50, the same points in 2 segments in 2.9-3.4 ms (bench/vector_scale's vectors, the
# service's filter, recall@10 1.000 both).
SEGMENTS = 2
# A child's build that outlasts this is stopped (the shard stays as it was, unbuilt).
BUILD_TIMEOUT_SECONDS = 3600.0
# Every filter field has a payload index; only the scope is a tenant (its points are kept
# together, and a scope's own HNSW links are built when it is large enough to need them).
# The other fields' indexes only filter: with HNSW links per value block as well, the build
# made extra graphs over most of the points (one per state, predicate and time range) and
# took ~6x as long.
PAYLOAD_INDEXES: tuple[tuple[str, edge.PayloadSchemaParams], ...] = (
    ("scope_id", edge.KeywordIndexParams(is_tenant=True)),
    ("fact_key", edge.KeywordIndexParams(enable_hnsw=False)),
    ("version_id", edge.KeywordIndexParams(enable_hnsw=False)),
    ("predicate", edge.KeywordIndexParams(enable_hnsw=False)),
    ("state", edge.IntegerIndexParams(lookup=True, range=False, enable_hnsw=False)),
    ("valid_from", edge.FloatIndexParams(enable_hnsw=False)),
    ("valid_to", edge.FloatIndexParams(enable_hnsw=False)),
    ("recorded_at", edge.FloatIndexParams(enable_hnsw=False)),
    ("superseded_at", edge.FloatIndexParams(enable_hnsw=False)),
)
_CANDIDATE_FIELDS = ["fact_key", "version_id"]  # all a search reads of a payload
# Searches walk the HNSW graph over int8 copies of the vectors kept in RAM, then rescore
# a short list from the float32 originals, which stay on disk and are read per query.
_RESCORE = edge.SearchParams(
    quantization=edge.QuantizationSearchParams(rescore=True, oversampling=2.0)
)


def shard_config(dimensions: int) -> edge.EdgeConfig:
    """The shard's storage: float32 originals memory-mapped cold (paged in when read, not
    pre-loaded), int8 quantized copies pinned in RAM, payloads on disk."""
    return edge.EdgeConfig(
        vectors=edge.EdgeVectorParams(
            size=dimensions,
            distance=edge.Distance.Cosine,
            memory=edge.Memory.Cold,
            quantization_config=edge.ScalarQuantizationConfig(
                type=edge.ScalarType.Int8, quantile=0.99, memory=edge.Memory.Pinned
            ),
        ),
        payload_memory=edge.Memory.Cold,
        optimizers=edge.EdgeOptimizersConfig(default_segment_number=SEGMENTS),
    )


def _ensure_indexes(shard: edge.EdgeShard) -> None:
    """Creates each payload index that is missing or was made with bare types (a shard
    from before the index parameters: it then gets them once)."""
    schema = shard.info().payload_schema
    for key, params in PAYLOAD_INDEXES:
        have = schema.get(key)
        if have is None or have.params is None:
            shard.update(edge.UpdateOperation.create_field_index(key, params))


def _condition(condition: Condition) -> edge.FieldCondition:
    if condition.any is not None:
        return edge.FieldCondition(key=condition.key, match=edge.MatchAny(any=condition.any))
    if condition.value is not None:
        return edge.FieldCondition(key=condition.key, match=edge.MatchValue(value=condition.value))
    return edge.FieldCondition(
        key=condition.key,
        range=edge.RangeFloat(
            gte=condition.gte, gt=condition.gt, lte=condition.lte, lt=condition.lt
        ),
    )


def edge_filter(query: IndexQuery) -> edge.Filter:
    """The query's filter (payload.conditions) in qdrant-edge's types."""
    must, must_not = conditions(query)
    return edge.Filter(
        must=[_condition(c) for c in must] or None,
        must_not=[_condition(c) for c in must_not] or None,
    )


def candidates(points: Sequence[edge.ScoredPoint]) -> list[Candidate]:
    """Scored points (with their fact_key and version_id payload) as candidates."""
    return [
        Candidate(
            fact_key=str(p.payload["fact_key"]),
            version_id=str(p.payload["version_id"]),
            score=float(p.score),
        )
        for p in points
        if p.payload
    ]


class EdgeVectorIndex:
    def __init__(
        self, shard: edge.EdgeShard, path: Path, config: edge.EdgeConfig, dimensions: int
    ) -> None:
        self._shard = shard
        self._path = path
        self._config = config
        self._dimensions = dimensions
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-edge")
        # Searches while the shard's thread copies its files (it calls the shard for none
        # of that time, and no write lands meanwhile).
        self._copy_readers = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-edge-r")
        self._optimizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-hnsw")
        self._pending = 0
        self._built_points = 0  # what the shard held at the last build's copy
        self._optimizing = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._again = False  # an optimization was asked for while one ran
        self._closed = False
        self._copying = False
        # Every update since a build's copy was taken, in order, for the copy to replay.
        self._since_copy: list[edge.UpdateOperation] | None = None
        self._child: subprocess.Popen[str] | None = None

    @classmethod
    async def open(cls, path: Path, dimensions: int) -> EdgeVectorIndex:
        config = shard_config(dimensions)

        def open_sync() -> edge.EdgeShard:
            _settle_swap(path)
            path.mkdir(parents=True, exist_ok=True)
            if any(path.iterdir()):
                # A shard made before keeps its data and takes today's storage config.
                shard = edge.EdgeShard.load(str(path), config)
            else:
                shard = edge.EdgeShard.create(str(path), config)
            _ensure_indexes(shard)
            return shard

        shard = await asyncio.get_running_loop().run_in_executor(None, open_sync)
        return cls(shard, path, config, dimensions)

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _apply(self, operation: edge.UpdateOperation) -> None:
        """On the shard's thread: every update goes through here."""
        self._shard.update(operation)
        if self._since_copy is not None:
            self._since_copy.append(operation)

    def _upsert_sync(self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]]) -> None:
        points = [
            edge.Point(id=point_id(f.version_id), vector=[float(x) for x in v], payload=payload(f))
            for f, v in zip(facts, vectors, strict=True)
        ]
        if points:
            self._apply(edge.UpdateOperation.upsert_points(points))
        for fact in facts:
            if fact.superseded_at is not None or fact.recorded_at is None:
                continue
            recorded = fact.recorded_at.timestamp()
            self._apply(
                edge.UpdateOperation.set_payload_by_filter(
                    edge.Filter(
                        must=[
                            edge.FieldCondition(
                                key="fact_key", match=edge.MatchValue(value=fact.fact_key)
                            ),
                            edge.FieldCondition(
                                key="superseded_at", range=edge.RangeFloat(gte=FOREVER)
                            ),
                            edge.FieldCondition(
                                key="recorded_at", range=edge.RangeFloat(lt=recorded)
                            ),
                        ],
                        must_not=[
                            edge.FieldCondition(
                                key="version_id", match=edge.MatchValue(value=fact.version_id)
                            )
                        ],
                    ),
                    {"state": int(FactState.SUPERSEDED), "superseded_at": recorded},
                )
            )

    async def upsert(self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]]) -> None:
        await self._run(self._upsert_sync, list(facts), list(vectors))
        self._pending += len(facts)
        if self._pending >= max(SEGMENT_POINTS, self._built_points):
            self._start_optimize()
        elif self._pending >= OPTIMIZE_AFTER_POINTS:
            loop = asyncio.get_running_loop()
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(OPTIMIZE_IDLE_SECONDS, self._start_optimize)

    def _start_optimize(self) -> None:
        """On the event loop (an upsert or the idle timer)."""
        if self._closed:
            return
        self._loop = asyncio.get_running_loop()
        if self._optimizing.locked():
            self._again = True  # the running one starts another when it ends
            return
        self._pending = 0
        self._optimizer.submit(self._optimize_sync)

    def _optimize_sync(self) -> None:
        with self._optimizing:
            try:
                self._build()
            except Exception as exc:  # the shard stays searchable unbuilt
                if not self._closed:  # a close stops the child on purpose
                    log.warning("vector index optimization failed (%s)", type(exc).__name__)
        if self._again and not self._closed and self._loop is not None:
            self._again = False
            self._loop.call_soon_threadsafe(self._start_optimize)

    def _build(self) -> None:
        """On the optimizer's thread: copy, build the copy in a child, swap it in."""
        building = _beside(self._path, "building")
        swapped = False
        try:
            self._executor.submit(self._copy_sync, building).result()
            if self._closed:
                return
            self._child = subprocess.Popen(
                [sys.executable, "-m", "vera.services.retrieval.vectors.edge_build",
                 str(building), str(self._dimensions)],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                out, _ = self._child.communicate(timeout=BUILD_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.communicate()
                raise
            if self._child.returncode != 0:
                raise RuntimeError(f"the build exited with {self._child.returncode}")
            if out.strip() == "optimized" and not self._closed:
                self._executor.submit(self._swap_sync, building).result()
                swapped = True
        finally:
            self._child = None
            if not swapped:
                self._executor.submit(self._discard_sync, building).result()

    def _copy_sync(self, building: Path) -> None:
        """On the shard's thread, so no write lands halfway through the copy; searches go
        on meanwhile on the readers' thread (``search``)."""
        shutil.rmtree(building, ignore_errors=True)
        self._shard.flush()
        self._copying = True
        try:
            shutil.copytree(self._path, building)
        finally:
            self._copying = False
            self._copy_readers.submit(lambda: None).result()  # their last search ended
        self._built_points = int(self._shard.count(edge.CountRequest(exact=True)))
        self._since_copy = []

    def _discard_sync(self, building: Path) -> None:
        self._since_copy = None
        shutil.rmtree(building, ignore_errors=True)

    def _swap_sync(self, building: Path) -> None:
        """On the shard's thread. The built copy takes the updates made since it was copied
        and is flushed before it replaces the shard, so a crash at any step leaves a whole
        shard in place (``_settle_swap``). Opening it afresh also lets go of what a shard
        keeps resident after writes (at 100k points 900 MiB against 320 MiB opened anew).

        The serving shard closes first: searches wait on this thread either way, and two
        shards open at once were the process's peak (at 100k points +~220 MiB)."""
        self._shard.close()
        try:
            built = edge.EdgeShard.load(str(building), self._config)
            try:
                for operation in self._since_copy or ():
                    built.update(operation)
                built.flush()
            finally:
                built.close()
        except BaseException:
            self._load_sync()  # the shard as it was
            raise
        self._since_copy = None
        old = _beside(self._path, "old")
        shutil.rmtree(old, ignore_errors=True)
        self._path.rename(old)
        building.rename(self._path)
        self._load_sync()
        shutil.rmtree(old, ignore_errors=True)

    def _load_sync(self) -> None:
        """Opens the shard at its path until that works (a reopen right after a close can
        find the disk busy)."""
        for attempt in range(1, REOPEN_ATTEMPTS + 1):
            try:
                self._shard = edge.EdgeShard.load(str(self._path), self._config)
                return
            except Exception as exc:
                if attempt == REOPEN_ATTEMPTS:
                    log.error(
                        "vector index could not be opened again (%s); restart the service",
                        type(exc).__name__,
                    )
                    raise
                log.warning("vector index reopen failed (%s); retrying", type(exc).__name__)
                time.sleep(attempt)

    async def optimize(self) -> None:
        """Builds the HNSW graph now (tests and the benchmark)."""
        await asyncio.get_running_loop().run_in_executor(self._optimizer, self._optimize_sync)

    def _search_sync(self, vector: list[float], query: IndexQuery, limit: int) -> list[Candidate]:
        points = self._shard.query(
            edge.QueryRequest(
                limit=limit,
                query=edge.Query.Nearest(vector),
                filter=edge_filter(query),
                with_payload=_CANDIDATE_FIELDS,
                params=_RESCORE,
            )
        )
        return candidates(points)

    async def search(
        self, vector: Sequence[float], query: IndexQuery, limit: int
    ) -> list[Candidate]:
        vector = [float(x) for x in vector]
        if self._copying:  # the shard's thread copies it for a build (seconds at 100k)
            found = await asyncio.get_running_loop().run_in_executor(
                self._copy_readers, self._search_beside_copy, vector, query, limit
            )
            if found is not None:
                return found
        return await self._run(self._search_sync, vector, query, limit)

    def _search_beside_copy(
        self, vector: list[float], query: IndexQuery, limit: int
    ) -> list[Candidate] | None:
        """On the readers' thread. None once the copy has ended: the shard's thread is
        back on the shard, and a search that started later must not run beside it (the
        copy waits only for those that started before it ended)."""
        if not self._copying:
            return None
        return self._search_sync(vector, query, limit)

    async def count(self) -> int:
        return int(await self._run(lambda: self._shard.count(edge.CountRequest(exact=True))))

    def shard_info(self) -> edge.ShardInfo:
        """The shard's own counts (points, indexed vectors, segments), as the benches
        report them."""
        return self._shard.info()

    async def delete(self, version_ids: Sequence[str]) -> None:
        ids: list[int | uuid.UUID | str] = [point_id(v) for v in version_ids]
        if ids:
            # The shard is looked up on its thread: a swap queued before may replace it.
            operation = edge.UpdateOperation.delete_points(ids)
            await self._run(self._apply, operation)

    async def close(self) -> None:
        if self._closed:
            return  # idempotent: the service's cleanup may find it closed already
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        child = self._child
        if child is not None:
            child.kill()  # its copy is discarded; the shard stays as it was
        self._optimizer.shutdown(wait=True)
        try:
            await self._run(lambda: self._shard.close())
        finally:
            self._executor.shutdown(wait=True)
            self._copy_readers.shutdown(wait=True)


def _beside(path: Path, role: str) -> Path:
    return path.with_name(f"{path.name}.{role}")


def _settle_swap(path: Path) -> None:
    """Before a shard opens: a swap that a crash interrupted between its two renames left
    only the previous shard (renamed ``.old``), which takes its place again; leftovers of
    a build go."""
    old = _beside(path, "old")
    if not path.exists() and old.exists():
        old.rename(path)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(_beside(path, "building"), ignore_errors=True)
