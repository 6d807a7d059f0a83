"""A new replica's shortcut: the index writer's memory snapshot (memory_snapshot.py),
published into PostgreSQL, so that a replica starting with an empty data directory (a new
pod, a rollout, a scale-out) copies it and reads only the rows written since, instead of
refilling from every document.

Only the writer publishes, and only a snapshot made under the documents epoch that is still
current when its copy commits: the copy takes ``index_state``'s row lock last, so it either
commits before an erasure or a re-embedding changes the epoch (whose transaction then
deletes it: ``purge``) or sees the new epoch and rolls back. No erased text outlives the
erasure's commit in these tables (their dead rows wait for vacuum, as deleted documents do).

The file's body is a pickle. Each copy carries an HMAC under a key derived from the
deployment's internal secret (VERA_RPC__AUTH_KEY), and a replica keeps a copy only when the
MAC of what it received matches: write access to the database alone cannot make retrieval
unpickle something of its choosing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from pathlib import Path
from typing import BinaryIO

import asyncpg

from vera.services.retrieval.memory_snapshot import Dumped, MemorySnapshot

log = logging.getLogger(__name__)

# One row per 8 MiB: a copy streams without holding the file in memory.
CHUNK_BYTES = 8 * 1024 * 1024
_MAC_CONTEXT = b"vera retrieval memory snapshot v1"


async def purge(conn: asyncpg.Connection) -> None:
    """Deletes every published copy (in the transaction that changes the documents epoch)."""
    await conn.execute("DELETE FROM shared_snapshot")
    await conn.execute("DELETE FROM shared_snapshot_chunks")


class SharedSnapshot:
    def __init__(self, pool: asyncpg.Pool, secret: bytes) -> None:
        self._pool = pool
        self._mac_key = hmac.new(secret, _MAC_CONTEXT, hashlib.sha256).digest()

    async def publish(self, path: Path, writer_epoch: int) -> int | None:
        """Copies the committed snapshot at ``path`` into the database unless it is there
        already; returns its position, or None when its epoch is no longer current or
        another process writes the index."""
        try:
            file = path.open("rb")  # an open file keeps its contents through a replace
        except FileNotFoundError:
            return None
        with file:
            header = json.loads(await asyncio.to_thread(file.readline))
            file.seek(0)
            published = await self._pool.fetchrow(
                "SELECT documents_epoch, position FROM shared_snapshot WHERE id"
            )
            if published is not None and (
                str(published["documents_epoch"]),
                published["position"],
            ) == (header["key"]["documents_epoch"], header["position"]):
                return int(header["position"])  # there already
            try:
                await self._copy(file, header, writer_epoch)
            except _Outdated:
                return None
        return int(header["position"])

    async def _copy(self, file: BinaryIO, header: dict, writer_epoch: int) -> None:
        generation = uuid.uuid4()
        mac = hmac.new(self._mac_key, digestmod=hashlib.sha256)
        size = 0
        async with self._pool.acquire() as conn, conn.transaction():
            for seq in range(1 << 31):
                chunk = await asyncio.to_thread(_read_into, file, mac)
                if not chunk:
                    break
                size += len(chunk)
                await conn.execute(
                    "INSERT INTO shared_snapshot_chunks VALUES ($1, $2, $3)",
                    generation, seq, chunk,
                )  # fmt: skip
            # Last, and held to the commit: an epoch change waits for this copy to land
            # (and deletes it) or this copy sees the change and rolls back.
            state = await conn.fetchrow(
                "SELECT documents_epoch, writer_epoch FROM index_state WHERE id FOR UPDATE"
            )
            if (
                str(state["documents_epoch"]) != header["key"]["documents_epoch"]
                or state["writer_epoch"] != writer_epoch
            ):
                raise _Outdated
            await conn.execute(
                "DELETE FROM shared_snapshot_chunks WHERE generation <> $1", generation
            )
            await conn.execute(
                "INSERT INTO shared_snapshot (generation, documents_epoch, position, size,"
                " mac) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET"
                " generation = $1, documents_epoch = $2, position = $3, size = $4,"
                " mac = $5, published_at = now()",
                generation, state["documents_epoch"], header["position"], size,
                mac.digest(),
            )  # fmt: skip

    async def fetch(
        self, conn: asyncpg.Connection, documents_epoch: str, local: MemorySnapshot
    ) -> bool:
        """Copies the published snapshot into ``local``'s file when it was made under
        ``documents_epoch`` and its MAC holds; run in the transaction that reads the
        documents after it. ``local.read`` then checks it as any file of its own."""
        head = await conn.fetchrow("SELECT * FROM shared_snapshot WHERE id")
        if head is None or str(head["documents_epoch"]) != documents_epoch:
            return False
        file, generation = await asyncio.to_thread(local.open_partial)
        try:
            with file:
                mac = hmac.new(self._mac_key, digestmod=hashlib.sha256)
                size = 0
                for seq in range(1 << 31):
                    chunk = await conn.fetchval(
                        "SELECT chunk FROM shared_snapshot_chunks"
                        " WHERE generation = $1 AND seq = $2",
                        head["generation"], seq,
                    )  # fmt: skip
                    if chunk is None:
                        break
                    size += len(chunk)
                    if size > head["size"]:
                        break
                    await asyncio.to_thread(_write_from, file, mac, chunk)
            if size != head["size"] or not hmac.compare_digest(mac.digest(), head["mac"]):
                log.warning("shared memory snapshot failed its check; refilling")
                local.abandon(file.name)
                return False
            return await asyncio.to_thread(
                local.commit, Dumped(Path(file.name), head["position"], generation)
            )
        except BaseException:
            local.abandon(file.name)
            raise


class _Outdated(Exception):
    """Rolls a copy back: the documents or the writer changed while it was written."""


def _read_into(file: BinaryIO, mac: hmac.HMAC) -> bytes:
    chunk = file.read(CHUNK_BYTES)
    mac.update(chunk)
    return chunk


def _write_from(file: BinaryIO, mac: hmac.HMAC, chunk: bytes) -> None:
    mac.update(chunk)
    file.write(chunk)
