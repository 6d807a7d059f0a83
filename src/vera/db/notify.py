"""Waiting for PostgreSQL NOTIFY on one channel, over a dedicated connection.

A long poll reads, finds nothing, and waits here for the next notice instead of sleeping a
fixed interval: a change is seen as soon as its transaction commits, and an idle service
asks the database nothing. Notices are only a wake-up call: a waiter always re-reads, so a
notice lost while the connection was down costs latency (the wait's timeout), never data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

log = logging.getLogger(__name__)

LISTENER_NAME = "vera-listener"  # how an operator finds these connections in pg_stat_activity
RECONNECT_SECONDS = 0.5
MAX_RECONNECT_SECONDS = 30.0


class ChannelWatch:
    """Counts the notices on ``channel``; ``generation`` before a read and ``wait_past``
    after an empty one, so a notice that arrived in between is never waited for."""

    def __init__(self, dsn: str, channel: str) -> None:
        self._dsn = dsn
        self._channel = channel
        self._generation = 0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def generation(self) -> int:
        return self._generation

    def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name=f"listen {self._channel}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._wake()

    async def wait_past(self, generation: int, timeout: float) -> bool:
        """True once a notice newer than ``generation`` arrived; False after ``timeout``."""
        if self._generation != generation:
            return True
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _wake(self) -> None:
        self._generation += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def _on_notice(self, *_: object) -> None:
        self._wake()

    async def _listen(self) -> None:
        delay = RECONNECT_SECONDS
        while True:
            try:
                conn = await asyncpg.connect(
                    self._dsn,
                    timeout=10,
                    # Keepalives: an idle listener on a half-open link would never notice.
                    server_settings={
                        "application_name": LISTENER_NAME,
                        "tcp_keepalives_idle": "30",
                        "tcp_keepalives_interval": "10",
                        "tcp_keepalives_count": "3",
                    },
                )
            except Exception as exc:  # whatever it was, the next try may work: never die
                log.warning(
                    "cannot listen for %s (%s); retrying in %.1fs",
                    self._channel,
                    type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RECONNECT_SECONDS)
                continue
            delay = RECONNECT_SECONDS
            try:
                await self._hold(conn)
            except Exception as exc:  # e.g. InterfaceError: closed before the LISTEN
                log.warning("listening for %s failed (%s)", self._channel, type(exc).__name__)
                await asyncio.sleep(delay)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close(timeout=2)

    async def _hold(self, conn: asyncpg.Connection) -> None:
        """Listens on ``conn`` until it is lost."""
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        await conn.add_listener(self._channel, self._on_notice)
        # Whatever committed while no one listened: waiters re-read now.
        self._wake()
        await lost.wait()
        log.warning("lost the listening connection for %s; reconnecting", self._channel)
