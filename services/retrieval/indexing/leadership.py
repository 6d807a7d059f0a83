"""Which retrieval replica writes the index: a PostgreSQL advisory lock.

The lock is session-level and held on one dedicated connection for as long as the process
writes, so it goes the moment that session ends: a crash, a terminated backend, a closed
socket. Advisory locks are per database, so every deployment (one database) has exactly one
writer however many replicas it runs.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from vera.db.pool import SERVER_KEEPALIVES

# The lock's key: fixed, so every replica of every release contends for the same one
# ("veraindx" as a big-endian int64; positive, as pg_locks shows it in classid/objid).
WRITER_LOCK_KEY = int.from_bytes(b"veraindx", "big")
# How an operator finds the holder in pg_stat_activity.
LEASE_NAME = "vera-retrieval-writer"
CONNECT_TIMEOUT_SECONDS = 10.0
# A probe that takes longer than this counts as a lost session.
PROBE_TIMEOUT_SECONDS = 5.0


class PgWriterLease:
    """The writer lease: ``acquire`` tries the lock once; ``lost`` returns when a held lock
    is gone. A follower keeps its connection between tries."""

    def __init__(self, dsn: str, *, retry_seconds: float) -> None:
        self._dsn = dsn
        # How often a follower asks again, and how often a held session is probed (a
        # half-open link closes no socket).
        self.retry_seconds = retry_seconds
        self._conn: asyncpg.Connection | None = None
        self._closed = asyncio.Event()
        self._held = False

    async def acquire(self) -> bool:
        """True when this process holds the lock (now or already)."""
        if self._held and self._alive():
            return True
        if not self._alive():
            await self.release()
            self._conn = await asyncpg.connect(
                self._dsn,
                timeout=CONNECT_TIMEOUT_SECONDS,
                # The server side: a writer whose host vanished frees the lock.
                server_settings={"application_name": LEASE_NAME, **SERVER_KEEPALIVES},
            )
            closed = self._closed = asyncio.Event()
            self._conn.add_termination_listener(lambda _conn: closed.set())
        assert self._conn is not None
        self._held = bool(
            await self._conn.fetchval(
                "SELECT pg_try_advisory_lock($1)", WRITER_LOCK_KEY, timeout=PROBE_TIMEOUT_SECONDS
            )
        )
        return self._held

    async def lost(self) -> None:
        """Returns once the held lock's session has ended or stopped answering."""
        while not self._closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), self.retry_seconds)
                break
            try:
                assert self._conn is not None
                await self._conn.fetchval("SELECT 1", timeout=PROBE_TIMEOUT_SECONDS)
            except Exception:
                break
        self._held = False

    async def release(self) -> None:
        """Gives the lock up (closing its session); a broken one is dropped."""
        conn, self._conn, self._held = self._conn, None, False
        if conn is None:
            return
        try:
            await conn.close(timeout=PROBE_TIMEOUT_SECONDS)
        except Exception:
            conn.terminate()

    def _alive(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()
