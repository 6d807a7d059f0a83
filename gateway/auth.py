"""Who is calling, and which authorization classes the credential grants.

Only the local-dev profile exists so far: every call acts as the configured local
principal, which holds every class. Authenticated deployments plug in another
``Authenticator`` later; the guard already checks classes for every call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request

from vera.config import Settings
from vera.gateway.tools import AuthClass
from vera.identity.v1 import identity_pb2
from vera.rpc.backends import Backends


@dataclass(frozen=True)
class Caller:
    principal_id: str
    granted: frozenset[AuthClass]
    auth_profile: str


def scope_names(settings: Settings) -> dict[AuthClass, str]:
    mcp = settings.mcp
    return {
        AuthClass.READ: mcp.scope_read,
        AuthClass.PROPOSE: mcp.scope_propose,
        AuthClass.FEEDBACK: mcp.scope_feedback,
        AuthClass.SNAPSHOT: mcp.scope_snapshot,
    }


class Authenticator(Protocol):
    async def authenticate(self, request: Request | None, backends: Backends) -> Caller: ...


class LocalDevAuthenticator:
    """The single fixed local principal, created in identity on first use."""

    def __init__(self, settings: Settings) -> None:
        self._caller = Caller(
            principal_id=str(settings.mcp.local_principal_id),
            granted=frozenset(AuthClass),
            auth_profile="local-dev",
        )
        self._ensured = False
        self._lock = asyncio.Lock()

    async def authenticate(self, request: Request | None, backends: Backends) -> Caller:
        if not self._ensured:
            async with self._lock:
                if not self._ensured:
                    await backends.identity.EnsureLocalPrincipal(
                        identity_pb2.EnsureLocalPrincipalRequest(
                            principal_id=self._caller.principal_id
                        )
                    )
                    self._ensured = True
        return self._caller
