"""``retrieval.index_state``: the change-log cursor, the embedding the indexed vectors were
made with, and the writer epoch that fences a replica which lost the writer lease."""

from __future__ import annotations

import asyncpg

from vera.services.retrieval.memory.snapshot_shared import purge
from vera.services.retrieval.ports import WriterFenced

# Where a write of index_state holds only for the writer that claimed last ($2: its epoch;
# NULL: a process that never claimed, the lone writer).
_STILL_WRITER = "($2::bigint IS NULL OR writer_epoch = $2)"


class PgIndexCursor:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        # The writer epoch this process claimed (None: it never claimed; a lone writer).
        self.writer_epoch: int | None = None

    async def position(self) -> int:
        return int(await self._pool.fetchval("SELECT position FROM index_state WHERE id"))

    @staticmethod
    async def state(conn: asyncpg.Connection) -> asyncpg.Record:
        """position, embedding and documents_epoch, as ``conn``'s transaction sees them."""
        return await conn.fetchrow(
            "SELECT position, embedding, documents_epoch FROM index_state WHERE id"
        )

    async def current(self) -> asyncpg.Record:
        async with self._pool.acquire() as conn:
            return await self.state(conn)

    async def advance(self, conn: asyncpg.Connection, position: int) -> None:
        """Within the transaction that wrote the page; raising rolls the page back."""
        status = await conn.execute(
            "UPDATE index_state SET position = $1, updated_at = now()"
            f" WHERE id AND {_STILL_WRITER}",
            position,
            self.writer_epoch,
        )
        if status != "UPDATE 1":
            raise WriterFenced("another replica writes the index")

    async def indexed_embedding(self) -> str | None:
        value = await self._pool.fetchval("SELECT embedding FROM index_state WHERE id")
        return None if value is None else str(value)

    async def restart_for_embedding(self, embedding: str) -> object:
        """Rewinds to the log's start under ``embedding`` and a new documents epoch (the
        shared snapshot goes with the old one); returns that epoch."""
        async with self._pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval(
                "UPDATE index_state SET position = 0, embedding = $1,"
                " documents_epoch = gen_random_uuid(), updated_at = now()"
                f" WHERE id AND {_STILL_WRITER} RETURNING documents_epoch",
                embedding,
                self.writer_epoch,
            )
            if epoch is not None:
                await purge(conn)
        if epoch is None:
            raise WriterFenced("another replica writes the index")
        return epoch

    async def claim_writer(self) -> None:
        self.writer_epoch = int(
            await self._pool.fetchval(
                "UPDATE index_state SET writer_epoch = writer_epoch + 1 WHERE id"
                " RETURNING writer_epoch"
            )
        )

    async def check_writer(self) -> None:
        if self.writer_epoch is None:
            return
        current = await self._pool.fetchval("SELECT writer_epoch FROM index_state WHERE id")
        if current != self.writer_epoch:
            raise WriterFenced("another replica writes the index")
