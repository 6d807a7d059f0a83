"""Fixed-window call quotas, shared by both HTTP fronts: the gateway's per-principal
buckets (GUIDE §Quotas, ``vera.gateway.quota``) and the REST API's rate limits
(``vera.api.rate_limits``).

``QuotaStore`` is the seam for a shared store (several gateway replicas); the in-memory
store is exact for one process. A charge either fits the window and counts, or is
refused and counts nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class BucketLimit:
    limit: int
    window_seconds: int


@dataclass(frozen=True)
class Refusal:
    bucket: str
    retry_after_seconds: int


class QuotaStore(Protocol):
    async def try_charge(self, key: str, window_start: int, limit: int, ttl_seconds: int) -> bool:
        """Counts one call in the (key, window) counter unless it already holds ``limit``."""
        ...


class InMemoryQuotaStore:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._counts: dict[tuple[str, int], tuple[int, float]] = {}
        self._lock = asyncio.Lock()

    async def try_charge(self, key: str, window_start: int, limit: int, ttl_seconds: int) -> bool:
        async with self._lock:
            now = self._clock()
            self._evict(now)
            count, expires = self._counts.get((key, window_start), (0, window_start + ttl_seconds))
            if count >= limit:
                return False
            self._counts[(key, window_start)] = (count + 1, expires)
            return True

    def _evict(self, now: float) -> None:
        if len(self._counts) < 1024:
            return
        for slot in [slot for slot, (_, expires) in self._counts.items() if expires <= now]:
            del self._counts[slot]


class QuotaPolicy:
    """Charges one call against a holder's bucket (a principal, a token holder, an
    address); None means allowed."""

    def __init__(
        self,
        limits: dict[str, BucketLimit],
        store: QuotaStore,
        *,
        enabled: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limits = limits
        self._store = store
        self._enabled = enabled
        self._clock = clock

    async def charge(self, principal_id: str, bucket: str) -> Refusal | None:
        if not self._enabled:
            return None
        limit = self._limits[bucket]
        now = self._clock()
        window_start = int(now // limit.window_seconds) * limit.window_seconds
        key = f"{principal_id}:{bucket}"
        if await self._store.try_charge(key, window_start, limit.limit, limit.window_seconds):
            return None
        retry_after = max(1, math.ceil(window_start + limit.window_seconds - now))
        return Refusal(bucket, retry_after)
