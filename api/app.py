"""The REST API ASGI app: liveness, readiness, and the route modules, behind the rate
limits (``vera.api.rate_limits``) and the request guard (``vera.api.requests``): a
request's address and credential are charged, then Host, Origin, content type and body
size are checked, before any route, authenticator or service sees it."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vera.api.auth import RestAuthenticator, default_authenticator
from vera.api.console.pages import console_mount
from vera.api.console.sessions import SessionKeyCheck, SessionStore
from vera.api.curation import routes as curation_routes
from vera.api.identity import routes as identity_routes
from vera.api.rate_limits import RateLimit, api_quota
from vera.api.requests import RequestGuard
from vera.config import Settings
from vera.rpc.backends import Backends

log = logging.getLogger(__name__)

READINESS_TIMEOUT_SECONDS = 2.0


async def livez(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when every service this process calls answers its gRPC health check."""
    backends: Backends = request.app.state.backends
    failing = []
    for name, channel in zip(("identity", "knowledge", "retrieval", "snapshot"),
                             backends.channels, strict=True):
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=READINESS_TIMEOUT_SECONDS)
            if reply.status != health_pb2.HealthCheckResponse.SERVING:
                failing.append(name)
        except Exception:
            failing.append(name)
    if failing:
        return JSONResponse({"status": "unavailable", "failing": failing}, status_code=503)
    return JSONResponse({"status": "ok"})


def build_app(
    settings: Settings,
    *,
    authenticator: RestAuthenticator | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The REST app; ``clock`` times its rate-limit windows."""
    routes = [Route("/livez", livez), Route("/readyz", readyz), *identity_routes,
              *curation_routes, console_mount()]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.backends = Backends.open(settings, caller="api")
        try:
            yield
        finally:
            await app.state.backends.close()

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(settings.api.allowed_hosts),
        allowed_origins=list(settings.api.allowed_origins or ()),
    )
    rate_limits = api_quota(settings.api, clock)
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(RateLimit, quota=rate_limits),
                                Middleware(RequestGuard, security=security,
                                           body_timeout=settings.api.body_timeout_seconds),
                                Middleware(SessionKeyCheck)])
    app.state.settings = settings
    app.state.rate_limits = rate_limits
    app.state.authenticator = authenticator or default_authenticator(settings)
    app.state.console_sessions = SessionStore(
        settings.api.console_idle_seconds, settings.api.console_session_seconds,
        recheck_seconds=settings.mcp.revocation_cache_seconds)
    token = settings.api.console_sign_in_token
    app.state.console_sign_in_token = token.get_secret_value() if token else None
    return app
