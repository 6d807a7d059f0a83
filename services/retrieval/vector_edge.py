"""VectorIndex over qdrant-edge: one in-process HNSW shard with payload indexes and a WAL
under ``<data_dir>/vectors`` (the embedded default; a Qdrant server uses vector_qdrant).

Calls block, so they run on one worker thread. New points are searchable at once (the
shard scans its unindexed segment); building the HNSW graph (``optimize``) takes minutes at
100k facts on 2 cores, so it runs on a second thread after writes settle, never on a query's
path. Filters and payloads are the same as the qdrant-client adapter's (vector_qdrant).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import qdrant_edge as edge
from qdrant_client import models

from vera.services.retrieval.model import Candidate, Fact, FactState, IndexQuery
from vera.services.retrieval.vector_qdrant import FOREVER, build_filter, payload, point_id

log = logging.getLogger(__name__)
T = TypeVar("T")

# Optimize once this many points arrived since the last optimization and writes paused.
# An optimization merges segments and rebuilds the HNSW graph of everything (minutes at
# 80k points on 2 cores), so the pause must outlast the gap between two pages of a bulk
# load (~4 s): with 2 s, a 100k load rebuilt the graph every 2000 points and crawled.
OPTIMIZE_AFTER_POINTS = 2000
OPTIMIZE_IDLE_SECONDS = 10.0
_INDEXED = (
    ("scope_id", edge.PayloadSchemaType.Keyword),
    ("fact_key", edge.PayloadSchemaType.Keyword),
    ("version_id", edge.PayloadSchemaType.Keyword),
    ("predicate", edge.PayloadSchemaType.Keyword),
    ("state", edge.PayloadSchemaType.Integer),
    ("valid_from", edge.PayloadSchemaType.Float),
    ("valid_to", edge.PayloadSchemaType.Float),
    ("recorded_at", edge.PayloadSchemaType.Float),
    ("superseded_at", edge.PayloadSchemaType.Float),
)


def _condition(condition: object) -> edge.FieldCondition:
    assert isinstance(condition, models.FieldCondition), "build_filter makes field conditions"
    match = condition.match
    if isinstance(match, models.MatchAny):
        return edge.FieldCondition(key=condition.key, match=edge.MatchAny(any=match.any))
    if isinstance(match, models.MatchValue):
        return edge.FieldCondition(key=condition.key, match=edge.MatchValue(value=match.value))
    r = condition.range
    assert isinstance(r, models.Range), "only match and numeric range conditions are translated"
    return edge.FieldCondition(
        key=condition.key, range=edge.RangeFloat(gte=r.gte, gt=r.gt, lte=r.lte, lt=r.lt)
    )


def edge_filter(query_filter: models.Filter) -> edge.Filter:
    """The qdrant-client filter of vector_qdrant.build_filter, in qdrant-edge's types."""
    must = [_condition(c) for c in query_filter.must or []]
    must_not = [_condition(c) for c in query_filter.must_not or []]
    return edge.Filter(must=list(must) or None, must_not=list(must_not) or None)


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
    def __init__(self, shard: edge.EdgeShard) -> None:
        self._shard = shard
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-edge")
        self._optimizer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-hnsw")
        self._pending = 0
        self._optimizing = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    @classmethod
    async def open(cls, path: Path, dimensions: int) -> EdgeVectorIndex:
        def open_sync() -> edge.EdgeShard:
            path.mkdir(parents=True, exist_ok=True)
            config = edge.EdgeConfig(
                vectors=edge.EdgeVectorParams(size=dimensions, distance=edge.Distance.Cosine)
            )
            if any(path.iterdir()):
                return edge.EdgeShard.load(str(path))
            shard = edge.EdgeShard.create(str(path), config)
            for key, schema in _INDEXED:
                shard.update(edge.UpdateOperation.create_field_index(key, schema))
            return shard

        shard = await asyncio.get_running_loop().run_in_executor(None, open_sync)
        return cls(shard)

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
        if self._pending >= OPTIMIZE_AFTER_POINTS:
            loop = asyncio.get_running_loop()
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(OPTIMIZE_IDLE_SECONDS, self._start_optimize)

    def _start_optimize(self) -> None:
        if self._closed or self._optimizing.locked():
            return
        self._pending = 0
        self._optimizer.submit(self._optimize_sync)

    def _optimize_sync(self) -> None:
        with self._optimizing:
            try:
                self._shard.optimize()
            except Exception as exc:  # the shard stays searchable unoptimized
                log.warning("vector index optimization failed (%s)", type(exc).__name__)

    async def optimize(self) -> None:
        """Builds the HNSW graph now (tests and the benchmark)."""
        await asyncio.get_running_loop().run_in_executor(self._optimizer, self._optimize_sync)

    def _search_sync(self, vector: list[float], query: IndexQuery, limit: int) -> list[Candidate]:
        points = self._shard.query(
            edge.QueryRequest(
                limit=limit,
                query=edge.Query.Nearest(vector),
                filter=edge_filter(build_filter(query)),
                with_payload=True,
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
            await self._run(self._shard.update, edge.UpdateOperation.delete_points(ids))

    async def close(self) -> None:
        if self._closed:
            return  # idempotent: the service's cleanup may find it closed already
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._optimizer.shutdown(wait=True)
        try:
            await self._run(self._shard.close)
        finally:
            self._executor.shutdown(wait=True)
