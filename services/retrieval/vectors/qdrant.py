"""VectorIndex over qdrant-client: a Qdrant server, local mode on disk, or ``:memory:``.

qdrant-client calls block (local mode is brute force in Python), so every call runs on
one dedicated worker thread, which also serializes access to the local-mode client.
A Qdrant server that cannot be reached when the service starts does not keep it from
starting: every call checks the collection first until that succeeds, so meanwhile each
one fails and searches answer from the lexical leg (the pipeline's degraded mode).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from pydantic import SecretStr
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException

from vera.services.retrieval.domain import Candidate, Fact, FactState, IndexQuery
from vera.services.retrieval.vectors.payload import (
    FOREVER,
    MEMORY_LOCATION,
    Condition,
    conditions,
    payload,
    point_id,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


def _condition(condition: Condition) -> models.FieldCondition:
    if condition.any is not None:
        return models.FieldCondition(key=condition.key, match=models.MatchAny(any=condition.any))
    if condition.value is not None:
        return models.FieldCondition(
            key=condition.key, match=models.MatchValue(value=condition.value)
        )
    return models.FieldCondition(
        key=condition.key,
        range=models.Range(gt=condition.gt, gte=condition.gte, lt=condition.lt, lte=condition.lte),
    )


def build_filter(query: IndexQuery) -> models.Filter:
    must, must_not = conditions(query)
    return models.Filter(
        must=[_condition(c) for c in must], must_not=[_condition(c) for c in must_not] or None
    )


def open_client(
    qdrant_url: str | None, data_dir: Path, api_key: SecretStr | None = None
) -> QdrantClient:
    """A server URL, ``:memory:`` (tests), or local mode under ``<data_dir>/qdrant``."""
    if qdrant_url == MEMORY_LOCATION:
        return QdrantClient(location=MEMORY_LOCATION)
    if qdrant_url:
        return QdrantClient(url=qdrant_url, api_key=api_key.get_secret_value() if api_key else None)
    path = data_dir / "qdrant"
    path.mkdir(parents=True, exist_ok=True)
    return QdrantClient(path=str(path))


class QdrantVectorIndex:
    def __init__(self, collection: str, dimensions: int) -> None:
        self._client: QdrantClient | None = None
        self._collection = collection
        self._dimensions = dimensions
        self._server = False
        self._collection_ready = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-qdrant")

    @classmethod
    async def open(
        cls,
        connect: Callable[[], QdrantClient],
        collection: str,
        dimensions: int,
        *,
        server: bool,
    ) -> QdrantVectorIndex:
        """``connect`` runs on the index's own thread (local mode keeps SQLite handles that
        belong to the thread that opened them)."""
        index = cls(collection, dimensions)
        try:
            await index._run(index._open_sync, connect, server)
        except BaseException:
            await index.close()
            raise
        return index

    @property
    def client(self) -> QdrantClient:
        assert self._client is not None, "index is not open"
        return self._client

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _run_ready(self, fn: Callable[..., T], *args: object) -> T:
        """``_run`` once the collection is known to exist (checked first until it is)."""

        def call() -> T:
            if not self._collection_ready:
                self._ensure_collection_sync()
            return fn(*args)

        return await self._run(call)

    def _open_sync(self, connect: Callable[[], QdrantClient], server: bool) -> None:
        self._client = connect()
        self._server = server
        try:
            self._ensure_collection_sync()
        except ResponseHandlingException as exc:
            # No HTTP answer (down or unreachable). An answer that refuses us, such as a
            # wrong API key, still fails the start: that is configuration, not an outage.
            if not server:
                raise
            log.warning(
                "Qdrant server unreachable at start (%s); vector calls fail until it answers",
                type(exc).__name__,
            )

    def _ensure_collection_sync(self) -> None:
        server = self._server
        if self.client.collection_exists(self._collection):
            self._collection_ready = True
            return
        self.client.create_collection(
            self._collection,
            vectors_config=models.VectorParams(
                size=self._dimensions, distance=models.Distance.COSINE
            ),
        )
        if server:  # local mode has no payload indexes; a server needs them for filters
            for key, schema in (
                ("scope_id", models.PayloadSchemaType.KEYWORD),
                ("fact_key", models.PayloadSchemaType.KEYWORD),
                ("state", models.PayloadSchemaType.INTEGER),
                ("valid_from", models.PayloadSchemaType.FLOAT),
                ("valid_to", models.PayloadSchemaType.FLOAT),
            ):
                self.client.create_payload_index(self._collection, key, schema)
        self._collection_ready = True

    def _upsert_sync(self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]]) -> None:
        points = [
            models.PointStruct(id=point_id(f.version_id), vector=list(v), payload=payload(f))
            for f, v in zip(facts, vectors, strict=True)
        ]
        if points:
            self.client.upsert(self._collection, points=points, wait=True)
        for fact in facts:
            if fact.superseded_at is not None or fact.recorded_at is None:
                continue
            recorded = fact.recorded_at.timestamp()
            self.client.set_payload(
                self._collection,
                payload={"state": int(FactState.SUPERSEDED), "superseded_at": recorded},
                points=models.Filter(
                    must=[
                        models.FieldCondition(
                            key="fact_key", match=models.MatchValue(value=fact.fact_key)
                        ),
                        models.FieldCondition(key="superseded_at", range=models.Range(gte=FOREVER)),
                        models.FieldCondition(key="recorded_at", range=models.Range(lt=recorded)),
                    ],
                    must_not=[
                        models.FieldCondition(
                            key="version_id", match=models.MatchValue(value=fact.version_id)
                        )
                    ],
                ),
                wait=True,
            )

    async def upsert(self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]]) -> None:
        await self._run_ready(self._upsert_sync, list(facts), list(vectors))

    def _search_sync(self, vector: list[float], query: IndexQuery, limit: int) -> list[Candidate]:
        response = self.client.query_points(
            self._collection,
            query=vector,
            query_filter=build_filter(query),
            limit=limit,
            with_payload=["fact_key", "version_id"],
        )
        return [
            Candidate(
                fact_key=str(point.payload["fact_key"]),
                version_id=str(point.payload["version_id"]),
                score=float(point.score),
            )
            for point in response.points
            if point.payload
        ]

    async def search(
        self, vector: Sequence[float], query: IndexQuery, limit: int
    ) -> list[Candidate]:
        return await self._run_ready(self._search_sync, list(vector), query, limit)

    async def delete(self, version_ids: Sequence[str]) -> None:
        ids = [point_id(v) for v in version_ids]
        if ids:
            await self._run_ready(
                lambda: self.client.delete(
                    self._collection, points_selector=models.PointIdsList(points=ids)
                )
            )

    async def count(self) -> int:
        result = await self._run_ready(lambda: self.client.count(self._collection, exact=True))
        return int(result.count)

    async def close(self) -> None:
        try:
            if self._client is not None:
                await self._run(self._client.close)
        finally:
            self._executor.shutdown(wait=True)
