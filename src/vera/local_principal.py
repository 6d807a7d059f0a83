"""The local-dev principal: the one fixed identity every local-dev call acts as.

Both front ends (the MCP gateway and the REST API) use it; identity creates the principal
on first use, once per process however many first calls race.
"""

from __future__ import annotations

import asyncio

from vera.config import Settings
from vera.identity.v1 import identity_pb2
from vera.rpc.backends import Backends


class LocalPrincipal:
    """The configured local principal, ensured in identity before it is first used."""

    def __init__(self, settings: Settings) -> None:
        self.principal_id = str(settings.mcp.local_principal_id)
        self._ensured = False
        self._lock = asyncio.Lock()

    async def ensure(self, backends: Backends, timeout: float | None = None) -> str:
        """Makes sure identity knows the principal (one call per process, within
        ``timeout`` seconds if given); returns its id."""
        if not self._ensured:
            async with self._lock:
                if not self._ensured:
                    await backends.identity.EnsureLocalPrincipal(
                        identity_pb2.EnsureLocalPrincipalRequest(principal_id=self.principal_id),
                        timeout=timeout,
                    )
                    self._ensured = True
        return self.principal_id
