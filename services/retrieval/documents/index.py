"""The indexed facts as the pipeline reads them (ports.SearchIndex) and the tailer writes
them (ports.IndexWriter), put together from their parts: the ``documents`` table
(table.py), the ``index_state`` row with its writer fence (cursor.py) and, by default, the
in-process memory (memory/) on its worker thread (memory/worker.py) with its snapshots
(memory/snapshots.py).

With a FactMemory (the default in the service), searches run BM25 in process over it, and
the memory is reloaded from ``documents`` on start (from a local snapshot plus the rows
written since, when one is reusable). Without one, the query runs in PostgreSQL
(table.PgTextSearch): the PostgreSQL-only fallback.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import asyncpg

from vera.services.retrieval.documents.cursor import PgIndexCursor
from vera.services.retrieval.documents.table import (
    PgDocuments,
    PgTextSearch,
    by_position,
    fact_from_row,
    stored_vector,
)
from vera.services.retrieval.domain import Candidate, CandidateFeatures, Fact, IndexQuery
from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT, FactMemory
from vera.services.retrieval.memory.snapshot_file import MemorySnapshot
from vera.services.retrieval.memory.snapshot_shared import SharedSnapshot
from vera.services.retrieval.memory.snapshots import MemorySnapshots
from vera.services.retrieval.memory.worker import MemoryWorker

log = logging.getLogger(__name__)
LOAD_BATCH = 5000


class DocumentIndex:
    def __init__(
        self,
        pool: asyncpg.Pool,
        memory: FactMemory | None = None,
        *,
        context_weight: float = CONTEXT_WEIGHT,
        snapshot: MemorySnapshot | None = None,
        shared: SharedSnapshot | None = None,
    ) -> None:
        self._pool = pool
        self._documents = PgDocuments(pool)
        self._cursor = PgIndexCursor(pool)
        self._text_search = PgTextSearch(pool)
        self.context_weight = context_weight
        self.worker = MemoryWorker(memory) if memory is not None else None
        self._snapshots = (
            MemorySnapshots(self.worker, self._cursor, snapshot, shared)
            if self.worker is not None and snapshot is not None
            else None
        )
        # Where the last load came from: "documents", "snapshot" (its own file) or "shared
        # snapshot" (the writer's copy): tests, the bench.
        self.loaded_from = ""

    @property
    def memory(self) -> FactMemory | None:
        return None if self.worker is None else self.worker.memory

    async def load(self) -> int:
        """Refills the memory from ``documents`` (start-up). Returns the change-log position
        the loaded memory reflects: the cursor in the same snapshot.

        One snapshot: a writer in another replica may commit meanwhile, and paging outside
        one let a re-upserted or erased row shift the pages and skip a document. A reusable
        memory snapshot stands for every row up to its position; a full refill leaves one."""
        worker, snapshots = self.worker, self._snapshots
        if worker is None:
            return await self.cursor()
        async with self._pool.acquire() as conn, conn.transaction(
            isolation="repeatable_read", readonly=True
        ):
            state = await PgIndexCursor.state(conn)
            position_loaded = int(state["position"])
            key = (
                None
                if snapshots is None
                else snapshots.key_for(state["documents_epoch"], state["embedding"])
            )
            restored, loaded_from = None, "documents"
            if key is not None and snapshots is not None:
                restored, loaded_from = await snapshots.restore(conn, key, position_loaded)
            after: tuple[int, str] = (-1, "")
            if restored is not None:
                worker.memory, snapshot_position = restored
                after = (snapshot_position + 1, "")  # every version id sorts after ''
            while rows := await PgDocuments.page_after(conn, after, LOAD_BATCH):
                after = (rows[-1]["change_position"], rows[-1]["version_id"])
                for position, group in by_position(rows).items():
                    facts = [fact_from_row(r) for r in group]
                    vectors = [stored_vector(r) for r in group]
                    await worker.run(self._upsert_memory, facts, vectors, position)
        if snapshots is not None:
            snapshots.key = key
            snapshots.position = position_loaded
        self.loaded_from = "documents" if restored is None else loaded_from
        log.info("memory loaded from %s up to position %d", self.loaded_from, position_loaded)
        if restored is None and key is not None:
            await self.save_snapshot()
        return position_loaded

    async def save_snapshot(self) -> int | None:
        return None if self._snapshots is None else await self._snapshots.save()

    async def keep_snapshots(self, every_seconds: float) -> None:
        if self._snapshots is not None:
            await self._snapshots.keep(every_seconds)

    async def publish_snapshot(self) -> int | None:
        return None if self._snapshots is None else await self._snapshots.publish()

    def _upsert_memory(self, facts, vectors, position: int) -> None:
        """Rows as ``documents`` holds them now (a load, a scope reloaded after erasure)."""
        assert self.worker is not None
        self.worker.memory.upsert(facts, vectors, position)

    def _remember_page(self, facts, vectors, position: int) -> None:
        """A change-log page. One before where the memory stood is a replay from an earlier
        position (a follower's local shard, a vector store found empty, a re-embedding): the
        memory then stands there, since what it rewrote may be older than what it held and
        a restart from its snapshot must read every row past it again."""
        self._upsert_memory(facts, vectors, position)
        if self._snapshots is not None:
            self._snapshots.position = position

    def _drop_scopes_holding(self, version_ids: list[str]) -> list[str]:
        assert self.worker is not None
        scopes = self.worker.memory.drop_scopes_holding(version_ids)
        if scopes and self._snapshots is not None:
            self._snapshots.local.discard()  # it may hold the erased versions' text
        return scopes

    async def features(
        self,
        scope_ids: Sequence[str],
        version_ids: Sequence[str],
        vector: Sequence[float],
        query_text: str,
        query: IndexQuery | None = None,
    ) -> dict[str, CandidateFeatures]:
        if self.worker is None:
            return {}
        memory = self.worker.memory
        return await self.worker.run(
            memory.features, scope_ids, version_ids, vector, query_text, query
        )

    async def close(self) -> None:
        """Leaves a snapshot of the memory for the next start, then stops its thread."""
        if self.worker is not None:
            await self.save_snapshot()
            self.worker.shutdown()

    async def search(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        if self.worker is None:
            return await self._text_search.search(text, query, limit)
        memory = self.worker.memory
        return await self.worker.run(
            lambda: memory.search(text, query, limit, context_weight=self.context_weight)
        )

    async def has_documents(self, query: IndexQuery, *, with_attributes: bool) -> bool:
        return await self._documents.any_live(query, with_attributes=with_attributes)

    async def apply(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await self._documents.upsert(conn, facts, position, vectors)
            await self._cursor.advance(conn, position)
        await self.remember(facts, position, vectors)

    async def remember(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float] | None] | None = None,
    ) -> None:
        if self.worker is not None and facts:
            await self.worker.run(self._remember_page, list(facts), vectors, position)

    async def stored_vectors(self, version_ids: Sequence[str]) -> dict[str, list[float] | None]:
        return await self._documents.stored_vectors(version_ids)

    async def cursor(self) -> int:
        return await self._cursor.position()

    async def indexed_embedding(self) -> str | None:
        return await self._cursor.indexed_embedding()

    async def restart_for_embedding(self, embedding: str) -> None:
        epoch = await self._cursor.restart_for_embedding(embedding)
        if self.worker is not None and self._snapshots is not None:
            key = self._snapshots.key_for(epoch, embedding)
            await self.worker.run(self._snapshots.replaying, key)

    async def claim_writer(self) -> None:
        await self._cursor.claim_writer()

    async def check_writer(self) -> None:
        await self._cursor.check_writer()

    async def delete(self, version_ids: Sequence[str]) -> None:
        """Erasure: deletes the documents, then rebuilds the memory of the scopes that held
        them from what stays in ``documents``."""
        ids = list(version_ids)
        if not ids:
            return
        epoch = await self._documents.delete(ids)
        await self.forget(ids)
        if epoch is not None and self.worker is not None and self._snapshots is not None:
            await self.worker.run(self._snapshots.adopt_epoch, epoch)

    async def forget(self, version_ids: Sequence[str]) -> None:
        """Drops the memory of the scopes that held the versions and reloads them from what
        stays in ``documents``."""
        ids = list(version_ids)
        if self.worker is None or not ids:
            return
        scopes = await self.worker.run(self._drop_scopes_holding, ids)
        if not scopes:
            return
        rows = await self._documents.of_scopes(scopes)
        for position, group in by_position(rows).items():
            vectors = [stored_vector(r) for r in group]
            await self.worker.run(
                self._upsert_memory, [fact_from_row(r) for r in group], vectors, position
            )
