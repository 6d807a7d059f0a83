"""A short-lived cache of the identity service's ResolveProject answers, per gateway.

A get_context or project-bound search would otherwise spend one identity round trip per
call resolving the same (principal, project) pair. Only successful resolutions are kept,
for ``VERA_MCP__PROJECT_CACHE_SECONDS`` (default 2 s; 0 turns the cache off): a project
created a moment ago resolves at once (a miss is never cached), and a grant withdrawn
from a principal stops working in the gateway within that many seconds. ResolveScopes
(the list of readable projects) is not cached, so a new project joins project-less
searches at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from vera.identity.v1 import identity_pb2

MAX_ENTRIES = 10_000


class ProjectCache:
    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: dict[tuple[str, str], tuple[float, identity_pb2.Project]] = {}

    async def resolve(
        self,
        principal_id: str,
        project: str,
        load: Callable[[], Awaitable[identity_pb2.Project]],
    ) -> identity_pb2.Project:
        key = (principal_id, project)
        now = self._clock()
        hit = self._entries.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        resolved = await load()
        if self._ttl > 0:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (now + self._ttl, resolved)
        return resolved
