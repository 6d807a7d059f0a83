"""The REST API ASGI app: liveness, readiness, the declared route modules (identity,
curation; ``vera.api.routing``) and the console, behind the rate limits
(``vera.api.rate_limits``) and the request guard (``vera.api.requests``): a request's
address and credential are charged, then Host, Origin, content type and body size are
checked, before any route, authenticator or service sees it.

The routes' models are the API's description: OpenAPI 3.1 at ``/openapi.json``."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Literal

from fastapi import FastAPI
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response

from vera import SERVER_VERSION
from vera.api import audit, curation, errors, identity, proposing
from vera.api.auth import RestAuthenticator, default_authenticator
from vera.api.console.pages import console_mount
from vera.api.console.sessions import SessionKeyCheck, SessionStore
from vera.api.rate_limits import RateLimit, api_quota
from vera.api.requests import RequestGuard
from vera.api.routing import ResponseBody, Services, new_router
from vera.config import Settings
from vera.rpc.backends import Backends
from vera.rpc.refusals import RefusalTally

log = logging.getLogger(__name__)

READINESS_TIMEOUT_SECONDS = 2.0
# The REST contract's version (docs/rest-api.md, "Value spellings"): 2 spells enum values
# as MCP does; version 1's spelling lasts one release behind VERA_API__VALUE_SPELLING.
REST_API_VERSION = "2"


probes = new_router(tags=["probes"])


class Health(ResponseBody):
    status: Literal["ok", "unavailable"]
    failing: list[str] = Field(default_factory=list)


@probes.get("/livez")
async def livez() -> Health:
    return Health(status="ok")


@probes.get("/readyz", response_model=Health,
            responses={503: {"model": Health, "description": "a service is not serving"}})
async def readyz(backends: Services) -> Response:
    """Ready when every service this process calls answers its gRPC health check."""
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
    return JSONResponse({"status": "ok", "failing": []})


def build_app(
    settings: Settings,
    *,
    authenticator: RestAuthenticator | None = None,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The REST app; ``clock`` times its rate-limit windows."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.backends = Backends.open(settings, caller="api")
        stop_reporting = refusals.start_reporting(
            lambda: app.state.backends.identity, settings.observability.audit_head_seconds)
        try:
            yield
        finally:
            await stop_reporting()
            await app.state.backends.close()

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(settings.api.allowed_hosts),
        allowed_origins=list(settings.api.allowed_origins or ()),
    )
    rate_limits = api_quota(settings.api, clock)
    refusals = RefusalTally("api")
    app = FastAPI(
        title="VERA REST API", version=REST_API_VERSION, lifespan=lifespan,
        summary="Identity administration and curation of VERA's verified memory.",
        description=f"VERA server {SERVER_VERSION}.",
        openapi_url="/openapi.json", docs_url=None, redoc_url=None,
        middleware=[Middleware(RateLimit, quota=rate_limits, refusals=refusals),
                    Middleware(RequestGuard, security=security,
                               body_timeout=settings.api.body_timeout_seconds,
                               admit_large_body=curation.admit_ingest_body,
                               large_bodies_in_flight=settings.api.large_bodies_in_flight),
                    Middleware(SessionKeyCheck)])
    errors.install(app)
    for router in (probes, identity.router, curation.router, proposing.router, audit.router):
        app.include_router(router)
    app.routes.append(console_mount())
    app.state.settings = settings
    app.state.rate_limits = rate_limits
    app.state.refusals = refusals
    app.state.authenticator = authenticator or default_authenticator(settings)
    app.state.console_sessions = SessionStore(
        settings.api.console_idle_seconds, settings.api.console_session_seconds,
        recheck_seconds=settings.mcp.revocation_cache_seconds)
    token = settings.api.console_sign_in_token
    app.state.console_sign_in_token = token.get_secret_value() if token else None
    return app
