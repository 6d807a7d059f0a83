"""VectorIndex over qdrant-edge: one in-process HNSW shard with payload indexes and a WAL
under ``<data_dir>/vectors`` (the embedded default; a Qdrant server uses vector_qdrant).

Calls block, so they run on one worker thread. New points are searchable at once (the
shard scans its unindexed segment); building the HNSW graph (``optimize``) runs on a
second thread, never on a query's path: after writes settle, and during a bulk load each
time a segment's worth of points arrived. qdrant-edge holds the GIL for a whole
optimization (searches and updates release it), so segments are kept small enough that
one build stalls the process for seconds, not minutes; after a build the shard is opened
afresh, which lets go of what the build left resident. Filters and payloads are the same
as the qdrant-client adapter's (vector_qdrant).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import qdrant_edge as edge

from vera.services.retrieval.model import Candidate, Fact, FactState, IndexQuery
from vera.services.retrieval.vector_payload import (
    FOREVER,
    Condition,
    conditions,
    payload,
    point_id,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Optimize once this many points arrived since the last optimization and writes paused.
# The pause must outlast the gap between two pages of a bulk load (~4 s): with 2 s, a
# 100k load rebuilt the graph every 2000 points and crawled (a load is optimized per
# SEGMENT_POINTS instead).
OPTIMIZE_AFTER_POINTS = 2000
OPTIMIZE_IDLE_SECONDS = 10.0
# A shard that fails to open again after a build is retried this many times, 1 s, 2 s, ...
# apart (until it opens, searches fall back to the lexical leg and writes are retried).
REOPEN_ATTEMPTS = 5
# A segment holds about this many points at most, and a bulk load is optimized each time
# this many arrived: an optimization copies the segments it rewrites and builds their
# graph, and qdrant-edge holds the GIL for all of it (every coroutine of the process
# waits), so this bounds both the memory an optimization adds and how long it stalls
# (bench/vector_scale.py, 100k points on 2 cores: seconds per build, where one build of
# everything stalled the process for minutes).
SEGMENT_POINTS = 20_000
# Every filter field has a payload index; only the scope is a tenant (its points are kept
# together, and a scope's own HNSW links are built when it is large enough to need them).
# The other fields' indexes only filter: with HNSW links per value block as well, the build
# made extra graphs over most of the points (one per state, predicate and time range) and
# took ~6x as long.
_INDEXED: tuple[tuple[str, edge.PayloadSchemaParams], ...] = (
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
        # In KB of the float32 originals.
        optimizers=edge.EdgeOptimizersConfig(
            max_segment_size=SEGMENT_POINTS * dimensions * 4 // 1024
        ),
    )


def _ensure_indexes(shard: edge.EdgeShard) -> None:
    """Creates each payload index that is missing or was made with bare types (a shard
    from before the index parameters: it then gets them once)."""
    schema = shard.info().payload_schema
    for key, params in _INDEXED:
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
    """The query's filter (vector_payload.conditions) in qdrant-edge's types."""
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
    def __init__(self, shard: edge.EdgeShard, path: Path, config: edge.EdgeConfig) -> None:
        self._shard = shard
        self._path = path
        self._config = config
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-edge")
        self._optimizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-hnsw")
        self._pending = 0
        self._optimizing = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._again = False  # an optimization was asked for while one ran
        self._closed = False

    @classmethod
    async def open(cls, path: Path, dimensions: int) -> EdgeVectorIndex:
        config = shard_config(dimensions)

        def open_sync() -> edge.EdgeShard:
            path.mkdir(parents=True, exist_ok=True)
            if any(path.iterdir()):
                # A shard made before keeps its data and takes today's storage config.
                shard = edge.EdgeShard.load(str(path), config)
            else:
                shard = edge.EdgeShard.create(str(path), config)
            _ensure_indexes(shard)
            return shard

        shard = await asyncio.get_running_loop().run_in_executor(None, open_sync)
        return cls(shard, path, config)

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _upsert_sync(self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]]) -> None:
        points = [
            edge.Point(id=point_id(f.version_id), vector=[float(x) for x in v], payload=payload(f))
            for f, v in zip(facts, vectors, strict=True)
        ]
        if points:
            self._shard.update(edge.UpdateOperation.upsert_points(points))
        for fact in facts:
            if fact.superseded_at is not None or fact.recorded_at is None:
                continue
            recorded = fact.recorded_at.timestamp()
            self._shard.update(
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
        if self._pending >= SEGMENT_POINTS:
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
                optimized = self._shard.optimize()
            except Exception as exc:  # the shard stays searchable unoptimized
                log.warning("vector index optimization failed (%s)", type(exc).__name__)
                optimized = False
            if optimized:  # between the calls of the shard's own thread
                try:
                    self._executor.submit(self._reopen_sync).result()
                except Exception as exc:
                    log.error(
                        "vector index could not be opened again (%s); restart the service",
                        type(exc).__name__,
                    )
        if self._again and not self._closed and self._loop is not None:
            self._again = False
            self._loop.call_soon_threadsafe(self._start_optimize)

    def _reopen_sync(self) -> None:
        """Opens the shard afresh. qdrant-edge keeps what an optimization touched resident
        (the rewritten segments' pages, the build's heap) until the shard is closed: at
        100k points 900 MiB against 320 MiB for the same shard opened anew. A shard cannot
        be opened twice, so it is closed first and opened again until that works."""
        if self._closed:
            return
        self._shard.close()
        for attempt in range(1, REOPEN_ATTEMPTS + 1):
            try:
                self._shard = edge.EdgeShard.load(str(self._path), self._config)
                return
            except Exception as exc:
                if attempt == REOPEN_ATTEMPTS:
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
        return await self._run(self._search_sync, [float(x) for x in vector], query, limit)

    async def count(self) -> int:
        return int(await self._run(lambda: self._shard.count(edge.CountRequest(exact=True))))

    async def delete(self, version_ids: Sequence[str]) -> None:
        ids: list[int | uuid.UUID | str] = [point_id(v) for v in version_ids]
        if ids:
            # The shard is looked up on its thread: a reopen queued before may replace it.
            operation = edge.UpdateOperation.delete_points(ids)
            await self._run(lambda: self._shard.update(operation))

    async def close(self) -> None:
        if self._closed:
            return  # idempotent: the service's cleanup may find it closed already
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._optimizer.shutdown(wait=True)
        try:
            await self._run(lambda: self._shard.close())
        finally:
            self._executor.shutdown(wait=True)
