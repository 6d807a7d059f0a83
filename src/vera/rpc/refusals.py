"""Authorization and quota refusals a front (the MCP gateway, the REST API) answered,
counted per action and reason and sent to identity's audit trail once an interval
(``RecordRefusals``): a flood of refusals is a few records, never a write per refusal."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub

log = logging.getLogger(__name__)

AUTHORIZATION_REFUSED = "authorization.refused"
QUOTA_REFUSED = "quota.refused"
# What one report carries at most (identity refuses more); the rest waits for the next.
MAX_COUNTS = 64


class RefusalTally:
    def __init__(self, source: str) -> None:
        self._source = source  # "gateway" or "api"
        self._counts: Counter[tuple[str, str]] = Counter()

    def count(self, action: str, reason: str) -> None:
        self._counts[(action, reason)] += 1

    async def report(self, identity: IdentityServiceStub, window_seconds: float) -> None:
        """Sends what was counted since the last report; kept for the next one when
        identity does not answer."""
        taken = sorted(self._counts.items())[:MAX_COUNTS]
        if not taken:
            return
        for key, _ in taken:
            del self._counts[key]
        try:
            await identity.RecordRefusals(pb.RecordRefusalsRequest(
                source=self._source, window_seconds=round(window_seconds),
                counts=[pb.RefusalCount(action=action, reason=reason, count=count)
                        for (action, reason), count in taken]))
        except Exception:
            self._counts.update(dict(taken))
            raise

    def start_reporting(
        self, identity: Callable[[], IdentityServiceStub], interval: float
    ) -> Callable[[], Awaitable[None]]:
        """Reports every ``interval`` seconds; returns what stops it (after a last report)."""

        async def run() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self.report(identity(), interval)
                except Exception:
                    log.warning("refusals were not reported to the audit trail", exc_info=True)

        task = asyncio.create_task(run(), name="refusal-report")

        async def stop() -> None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(Exception):
                await self.report(identity(), interval)

        return stop
