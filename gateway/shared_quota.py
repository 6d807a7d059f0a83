"""The default quota store: counters in the identity service's PostgreSQL, so every
gateway replica serving a principal draws from one budget (GUIDE §Quotas).

The gateway's clock picks the fixed window; identity counts atomically (one upsert that
refuses at the limit) and drops the key's older windows. ``InMemoryQuotaStore`` stays
for a single process and for unit tests.
"""

from __future__ import annotations

from collections.abc import Callable

from vera.identity.v1 import identity_pb2
from vera.rpc.backends import Backends


class IdentityQuotaStore:
    def __init__(self, backends: Callable[[], Backends]) -> None:
        self._backends = backends

    async def try_charge(self, key: str, window_start: int, limit: int, ttl_seconds: int) -> bool:
        response = await self._backends().identity.ChargeQuota(
            identity_pb2.ChargeQuotaRequest(key=key, window_start=window_start, limit=limit)
        )
        return response.allowed
