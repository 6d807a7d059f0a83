"""Who is calling the REST API.

- local-dev profile (``LocalDevRestAuthenticator``): a request carrying the data dir's
  secret (``Authorization: Bearer <secret>``, ``VERA_API__LOCAL_SECRET``; ``vera.local_secret``)
  acts as the local principal, an administrator on its own machine; without it (another
  user of the same machine, over loopback) it is refused, and with no secret configured
  every request is.
- authenticated deployments (``ApiKeyRestAuthenticator``): ``Authorization: Bearer
  <VERA API key>``, checked by the identity service (only a SHA-256 digest is stored).

The REST API never accepts an MCP JWT (an agent's token cannot curate or administer), and
the MCP gateway never accepts an API key: the two credentials are separate by shape and by
verifier.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request

from vera.config import Settings
from vera.errors import Unauthenticated
from vera.identity.v1 import identity_pb2
from vera.local_principal import LocalPrincipal
from vera.mcp_tokens import LOCAL_KEY_ID
from vera.rpc.backends import Backends

API_KEY_PREFIX = "vera_"
MAX_CREDENTIAL_LENGTH = 256


@dataclass(frozen=True)
class RestCaller:
    principal_id: str
    auth_profile: str
    admin: bool = False
    # The credential the caller showed: its API key's id, or ``mcp_tokens.LOCAL_KEY_ID`` for
    # the data dir's secret. MCP tokens minted for the caller name it (``vera_key_id``).
    key_id: str = ""


class RestAuthenticator(Protocol):
    async def authenticate(self, request: Request, backends: Backends) -> RestCaller: ...


class LocalDevRestAuthenticator:
    """The local principal (``vera.local_principal``), an administrator on its own machine,
    for whoever shows the data dir's secret."""

    def __init__(self, settings: Settings) -> None:
        self._local = LocalPrincipal(settings)
        self._caller = RestCaller(
            self._local.principal_id, "local-dev", admin=True, key_id=LOCAL_KEY_ID
        )
        secret = settings.api.local_secret
        self._secret = secret.get_secret_value().encode() if secret is not None else None

    async def authenticate(self, request: Request, backends: Backends) -> RestCaller:
        credential = bearer_credential(request)
        if (
            self._secret is None
            or credential is None
            or not secrets.compare_digest(credential.encode(), self._secret)
        ):
            raise Unauthenticated()
        return await self.local_caller(backends)

    async def local_caller(self, backends: Backends) -> RestCaller:
        """The local principal, for a request that proved itself otherwise (the console's
        one-time sign-in token)."""
        await self._local.ensure(backends)
        return self._caller


def bearer_credential(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    credential = credential.strip()
    return credential or None


class ApiKeyRestAuthenticator:
    """``Authorization: Bearer <API key>``; anything else (an MCP JWT included) is 401."""

    async def authenticate(self, request: Request, backends: Backends) -> RestCaller:
        return await api_key_caller(backends, bearer_credential(request))


async def api_key_caller(backends: Backends, credential: str | None) -> RestCaller:
    """Whose API key ``credential`` is (identity checks its digest); anything that is not
    an API key is ``unauthenticated`` before identity is asked."""
    if (
        credential is None
        or len(credential) > MAX_CREDENTIAL_LENGTH
        or not credential.startswith(API_KEY_PREFIX)
    ):
        raise Unauthenticated()
    reply = await backends.identity.AuthenticateApiKey(
        identity_pb2.AuthenticateApiKeyRequest(api_key=credential)
    )
    return RestCaller(
        reply.principal.principal_id,
        "remote-authenticated",
        admin=reply.principal.admin,
        key_id=reply.key_id,
    )


def default_authenticator(settings: Settings) -> RestAuthenticator:
    if settings.auth_profile == "local-dev":
        return LocalDevRestAuthenticator(settings)
    return ApiKeyRestAuthenticator()
