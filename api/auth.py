"""Who is calling the REST API.

Only the local-dev profile exists so far: every request acts as the local principal.
Authenticated deployments plug in an authenticator that verifies API keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request

from vera.config import Settings
from vera.rpc.backends import Backends


@dataclass(frozen=True)
class RestCaller:
    principal_id: str
    auth_profile: str


class RestAuthenticator(Protocol):
    async def authenticate(self, request: Request, backends: Backends) -> RestCaller: ...


class LocalDevRestAuthenticator:
    def __init__(self, settings: Settings) -> None:
        self._caller = RestCaller(str(settings.mcp.local_principal_id), "local-dev")

    async def authenticate(self, request: Request, backends: Backends) -> RestCaller:
        return self._caller
