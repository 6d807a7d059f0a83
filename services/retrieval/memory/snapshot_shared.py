"""A new replica's shortcut: the index writer's memory snapshot (memory/snapshot_file.py),
published into PostgreSQL, so that a replica starting with an empty data directory (a new
pod, a rollout, a scale-out) copies it and reads only the rows written since, instead of
refilling from every document.

Only the writer publishes, and only a snapshot made under the documents epoch that is still
current when its copy commits: the copy takes ``index_state``'s row lock last, so it either
commits before an erasure or a re-embedding changes the epoch (whose transaction then
deletes it: ``purge``) or sees the new epoch and rolls back. No erased text outlives the
erasure's commit in these tables (their dead rows wait for vacuum, as deleted documents do).

The file's body is a pickle. Each copy carries HMACs under the retrieval replicas' own key
(VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY, which no other component holds): one over its head
(generation, size, header), checked before anything is written to disk, and one over the
file, checked before it is read. Write access to the database, even with the deployment's
internal key, cannot make retrieval unpickle something of its choosing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import shutil
import uuid
from pathlib import Path
from typing import BinaryIO

import asyncpg

from vera.services.retrieval.memory.snapshot_file import Dumped, MemorySnapshot, SnapshotKey

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
            header = (await asyncio.to_thread(file.readline)).rstrip(b"\n").decode()
            file.seek(0)
            epoch, position = MemorySnapshot.header_epoch_and_position(header)
            # Unlocked, to spare a copy that would roll back (a writer that lost its lease,
            # a file from before an erasure); the copy checks again under the lock.
            state = await self._pool.fetchrow(
                "SELECT i.documents_epoch, i.writer_epoch, s.generation, s.size, s.header,"
                " s.head_mac FROM index_state i LEFT JOIN shared_snapshot s ON s.id WHERE i.id"
            )
            if not _current(state, epoch, writer_epoch):
                return None
            if state["header"] == header and self._signed(state):
                return position  # there already, under this key
            try:
                size = await self._copy(file, header, epoch, writer_epoch)
            except _Outdated:
                return None
        log.info("memory snapshot published at position %d (%d MiB)", position, size >> 20)
        # After the commit, not under the lock: reading every old chunk takes ~3 ms a MiB.
        await self._pool.execute(
            "DELETE FROM shared_snapshot_chunks"
            " WHERE generation NOT IN (SELECT generation FROM shared_snapshot)"
        )
        return position

    async def _copy(self, file: BinaryIO, header: str, epoch: str, writer_epoch: int) -> int:
        """Streams the file in as a new generation and makes it the copy; its size."""
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
            if not _current(state, epoch, writer_epoch):
                raise _Outdated
            await conn.execute(
                "INSERT INTO shared_snapshot (generation, documents_epoch, header, size,"
                " head_mac, mac) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE"
                " SET generation = $1, documents_epoch = $2, header = $3, size = $4,"
                " head_mac = $5, mac = $6, published_at = now()",
                generation, state["documents_epoch"], header, size,
                self._head_mac(generation, size, header), mac.digest(),
            )  # fmt: skip
        return size

    def _head_mac(self, generation: uuid.UUID, size: int, header: str) -> bytes:
        signed = f"{generation}\n{size}\n{header}".encode()
        return hmac.new(self._mac_key, signed, hashlib.sha256).digest()

    def _signed(self, head: asyncpg.Record) -> bool:
        expected = self._head_mac(head["generation"], head["size"], head["header"])
        return hmac.compare_digest(expected, head["head_mac"])

    async def fetch(
        self, conn: asyncpg.Connection, key: SnapshotKey, cursor: int, local: MemorySnapshot
    ) -> bool:
        """Copies the published snapshot into ``local``'s file when its signed header fits
        ``key`` and ``cursor`` and its MACs hold; run in the transaction that reads the
        documents after it. ``local.read`` then checks it as any file of its own."""
        head = await conn.fetchrow("SELECT * FROM shared_snapshot WHERE id")
        if head is None or str(head["documents_epoch"]) != key.documents_epoch:
            return False
        if not self._signed(head):
            log.warning("shared memory snapshot failed its check; refilling")
            return False
        if not MemorySnapshot.fits(head["header"], key, cursor):
            log.info("shared memory snapshot is of other documents or code; refilling")
            return False  # e.g. the old writer's, during a rollout that changed the code
        size, generation = head["size"], head["generation"]
        local.path.parent.mkdir(parents=True, exist_ok=True)
        if size > shutil.disk_usage(local.path.parent).free:
            log.warning("no room for the shared memory snapshot; refilling")
            return False
        file, discards = await asyncio.to_thread(local.open_partial)
        try:
            with file:
                mac = hmac.new(self._mac_key, digestmod=hashlib.sha256)
                received = 0
                for seq in range(1 << 31):
                    chunk = await conn.fetchval(
                        "SELECT chunk FROM shared_snapshot_chunks"
                        " WHERE generation = $1 AND seq = $2 AND length(chunk) <= $3",
                        generation, seq, min(CHUNK_BYTES, size - received),
                    )  # fmt: skip
                    if not chunk:
                        break
                    received += len(chunk)
                    await asyncio.to_thread(_write_from, file, mac, chunk)
            if received != size or not hmac.compare_digest(mac.digest(), head["mac"]):
                log.warning("shared memory snapshot failed its check; refilling")
                local.abandon(file.name)
                return False
            position = MemorySnapshot.header_epoch_and_position(head["header"])[1]
            dumped = Dumped(Path(file.name), position, discards)
            return await asyncio.to_thread(local.commit, dumped)
        except BaseException:
            local.abandon(file.name)
            raise


def _current(state: asyncpg.Record, epoch: str, writer_epoch: int) -> bool:
    """Whether ``index_state`` still has the snapshot's documents and this writer."""
    return str(state["documents_epoch"]) == epoch and state["writer_epoch"] == writer_epoch


class _Outdated(Exception):
    """Rolls a copy back: the documents or the writer changed while it was written."""


def _read_into(file: BinaryIO, mac: hmac.HMAC) -> bytes:
    chunk = file.read(CHUNK_BYTES)
    mac.update(chunk)
    return chunk


def _write_from(file: BinaryIO, mac: hmac.HMAC, chunk: bytes) -> None:
    mac.update(chunk)
    file.write(chunk)
