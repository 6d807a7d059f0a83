"""The MCP gateway process: ``create_app`` is the documented ASGI factory.

    python -m vera.entrypoints.mcp.main
    uvicorn --factory vera.entrypoints.mcp.main:create_app

Run exactly one worker per process while metrics are enabled: the metrics registry
and its listener are process-local.

Startup rules: any environment but ``local`` refuses to start without built-in JWT or
external OAuth verification; a verification setup that cannot check issuer and audience is
refused; the unauthenticated local-dev profile binds only a loopback address unless
``VERA_MCP__ALLOW_UNAUTHENTICATED_NON_LOOPBACK=true``, which is logged loudly (the rule
the REST API shares, ``vera.entrypoints.loopback``).
"""

from __future__ import annotations

import sys

from starlette.applications import Starlette

from vera.config import ConfigError, Settings, load_settings
from vera.entrypoints.draining import serve
from vera.entrypoints.loopback import UnsupportedAuthProfile, refuse_unauthenticated_non_loopback
from vera.gateway.app import build_app
from vera.gateway.tokens import check_settings
from vera.logs import configure_logging
from vera.observability import correlation, tracing


def check_startup(settings: Settings) -> None:
    """Refuses configurations that would serve without authentication where that is unsafe."""
    if settings.auth_profile == "local-dev":
        refuse_unauthenticated_non_loopback(settings, "mcp")
        return
    # Anything set, check_settings names what a partial setup lacks (issuer, audience).
    if not settings.mcp.verification_set:
        raise UnsupportedAuthProfile(
            f"VERA_MCP__JWT_SECRET: VERA_ENVIRONMENT={settings.environment} requires built-in "
            "JWT or external OAuth verification (VERA_MCP__JWT_SECRET, VERA_MCP__OAUTH_JWKS_URL "
            "or VERA_MCP__OAUTH_SIGNING_KEY); the unauthenticated local-dev profile serves only "
            "VERA_ENVIRONMENT=local"
        )
    check_settings(settings)


def create_app(settings: Settings | None = None) -> Starlette:
    """Reads the settings, applies the startup rules, and returns the ASGI app.

    The gRPC channels and the metrics listener open in the app's lifespan, inside the
    event loop that serves it.
    """
    settings = settings if settings is not None else load_settings()
    check_startup(settings)
    tracing.configure_tracing("gateway")
    app = build_app(settings)
    app.add_middleware(correlation.RequestIds)
    return tracing.traced_starlette(app)


def main() -> int:
    try:
        settings = load_settings()
        configure_logging(settings.observability.log_level, "mcp",
                          settings.observability.log_format, correlation.log_fields)
        app = create_app(settings)
    except ConfigError as exc:
        print(f"vera mcp: {exc}", file=sys.stderr)
        return 2

    # Every tool call ends within its budget, so that is how long a stop waits for one.
    serve(
        app,
        readiness_paths=frozenset({"/healthz"}),
        grace=settings.mcp.request_budget_seconds,
        listener=settings.mcp,
        host=settings.mcp_bind_host,
        port=settings.mcp.port,
        workers=1,
        log_level=settings.observability.log_level.lower(),
        ws="none",
        lifespan="on",
        log_config=None,  # keep the process-wide format from configure_logging
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
