"""The audit chain's head (``vera.db.audit``), exported regularly so that a truncated or
rewritten tail shows: the record count as ``vera_audit_records`` and a log line with the
count and the head's hash, every ``VERA_OBSERVABILITY__AUDIT_HEAD_SECONDS``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from vera.db import audit
from vera.observability.service_metrics import ServiceMetrics

log = logging.getLogger(__name__)


def start_exporting(
    pool: asyncpg.Pool,
    metrics: ServiceMetrics,
    interval: float,
    before: Callable[[], Awaitable[None]] | None = None,
) -> Callable[[], Awaitable[None]]:
    """Starts the export (``before`` runs first each time: writes what was counted);
    returns what stops it."""
    seen: dict[str, float | None] = {"count": None}
    metrics.gauge(
        "vera_audit_records", "Records in this service's audit chain (its head's number).",
        lambda: seen["count"])

    async def run() -> None:
        while True:
            try:
                if before is not None:
                    await before()
                head = await audit.head(pool)
                seen["count"] = float(head.count)
                log.info("audit head: records=%d hash=%s", head.count, head.hash or "-")
            except Exception:
                log.warning("the audit head was not read", exc_info=True)
            await asyncio.sleep(interval)

    task = asyncio.create_task(run(), name="audit-head")

    async def stop() -> None:
        if before is not None:
            with contextlib.suppress(Exception):
                await before()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return stop
