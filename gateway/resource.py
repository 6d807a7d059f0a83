"""The OAuth 2.1 protected-resource boundary (RFC 9728, RFC 6750) of the MCP endpoint.

Every POST to ``/mcp`` in the remote-authenticated profile passes here first: Host and
Origin are checked, then the bearer token is verified and mapped to a principal. No or a
bad token gets HTTP 401 with ``WWW-Authenticate: Bearer resource_metadata="…"``; a valid
token without the server-wide required scopes gets 403 ``insufficient_scope``. The body
is the seed's JSON-RPC error (``unauthenticated`` -32001 / ``unauthorized`` -32002), so a
client branches on ``data.code`` as for any other failure. A built-in token that is
outdated, expired, or whose key is revoked or principal disabled also says which
(``data.reason``) and how to get a new one (``data.fix``). A backend failure while
resolving the principal is 503 with the mapped error (``internal_error`` with ``data.reason``
``unavailable`` when identity cannot be reached) and no internal text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from vera.config import Settings
from vera.errors import VeraError
from vera.gateway.auth import CALLER_STATE_KEY, AuthFailure, Caller, scope_names
from vera.gateway.credentials import KEY_REVOKED, PRINCIPAL_DISABLED
from vera.gateway.errors import from_vera_error, internal_error, jsonrpc_error
from vera.gateway.tokens import TOKEN_EXPIRED, TOKEN_OUTDATED
from vera.rpc.backends import Backends
from vera.rpc.refusals import AUTHORIZATION_REFUSED, RefusalTally

log = logging.getLogger(__name__)

METADATA_PATH = "/.well-known/oauth-protected-resource"
# A built-in token refused for one of these is renewed by running the fix.
RENEWABLE = frozenset({TOKEN_OUTDATED, TOKEN_EXPIRED, KEY_REVOKED, PRINCIPAL_DISABLED})
RENEW_FIX = "vera connect"


def metadata_url(request: Request) -> str:
    return str(request.base_url).rstrip("/") + METADATA_PATH


def refusal_data(reason: str) -> dict[str, str]:
    """What the client is told of a refused built-in token that minting a new one fixes;
    nothing for any other refusal (a forged or foreign token learns nothing)."""
    if reason in RENEWABLE:
        return {"reason": reason, "fix": RENEW_FIX}
    return {}


def challenge(request: Request, failure: AuthFailure) -> Response:
    params = [f'resource_metadata="{metadata_url(request)}"']
    if failure.status == 403:
        params += ['error="insufficient_scope"', f'scope="{failure.required_scope}"']
        body = jsonrpc_error("unauthorized", None, required_scope=failure.required_scope)
    else:
        if failure.token_presented:
            # RFC 6750 §3.1: no error code when the request carried no credential at all.
            params.append('error="invalid_token"')
        body = jsonrpc_error("unauthenticated", None, **refusal_data(failure.reason))
    return JSONResponse(
        body,
        status_code=failure.status,
        headers={"WWW-Authenticate": "Bearer " + ", ".join(params)},
    )


class Authenticator(Protocol):
    async def resolve(self, request: Request, backends: Backends) -> Caller: ...


class BearerAuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        backends: Callable[[], Backends],
        security: TransportSecuritySettings,
        refusals: RefusalTally,
    ) -> None:
        self._app = app
        self._auth = authenticator
        self._backends = backends
        self._refusals = refusals
        self._security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        refusal = await self._security.validate_request(request, is_post=False)
        if refusal is None:
            try:
                caller = await self._auth.resolve(request, self._backends())
            except AuthFailure as failure:
                if failure.status == 403:
                    self._refusals.count(AUTHORIZATION_REFUSED, failure.reason)
                refusal = challenge(request, failure)
            except VeraError as exc:
                log.warning("principal resolution failed: %s", exc.reason)
                # 503 is an outage's status: any other refusal here is a bare internal error,
                # so the status and data.code never disagree.
                outage = exc.reason == "UNAVAILABLE"
                mcp_error = from_vera_error(exc) if outage else internal_error()
                error = mcp_error.error.model_dump(exclude_none=True)
                refusal = JSONResponse(
                    {"jsonrpc": "2.0", "id": None, "error": error}, status_code=503
                )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER_STATE_KEY] = caller
        await self._app(scope, receive, send)


def protected_resource_metadata(settings: Settings) -> dict[str, Any]:
    mcp = settings.mcp
    # Interactive login goes to the external authorization server when one is configured;
    # the built-in exchange (POST /identity/mcp-token) is not an OAuth authorization server.
    servers = (
        [mcp.oauth_issuer]
        if mcp.oauth_issuer and (mcp.oauth_jwks_url or mcp.oauth_signing_key)
        else []
    )
    return {
        "resource": mcp.auth_audience,
        "authorization_servers": servers,
        "scopes_supported": list(scope_names(settings).values()),
        "bearer_methods_supported": ["header"],
        "resource_name": "VERA",
    }


def metadata_endpoint(settings: Settings) -> Callable[[Request], Any]:
    document = protected_resource_metadata(settings)

    async def endpoint(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    return endpoint
