"""The REST API process: ``create_app`` is its ASGI factory.

    python -m vera.entrypoints.api.main
    uvicorn --factory vera.entrypoints.api.main:create_app

Startup rules: the local-dev profile, where whoever shows the data dir's secret is the
local administrator, needs that secret (``VERA_API__LOCAL_SECRET``: `vera up` and `vera
api` pass it); and, shared with the MCP process (``vera.entrypoints.loopback``), it binds
only a loopback address unless ``VERA_API__ALLOW_UNAUTHENTICATED_NON_LOOPBACK=true``, which
is logged loudly.
"""

from __future__ import annotations

import sys

from starlette.applications import Starlette

from vera.api.app import build_app
from vera.config import ConfigError, Settings, load_settings
from vera.entrypoints.draining import serve
from vera.entrypoints.loopback import refuse_unauthenticated_non_loopback
from vera.logs import configure_logging
from vera.observability import correlation, tracing


def create_app(settings: Settings | None = None) -> Starlette:
    """Reads the settings, applies the startup rule, and returns the ASGI app."""
    settings = settings if settings is not None else load_settings()
    if settings.auth_profile == "local-dev" and settings.api.local_secret is None:
        raise ConfigError(
            "VERA_API__LOCAL_SECRET: required in local-dev (the data dir's local.secret; "
            "vera up and vera api pass it)")
    refuse_unauthenticated_non_loopback(settings, "api")
    tracing.configure_tracing("api")
    app = build_app(settings)
    app.add_middleware(correlation.RequestIds)
    return tracing.traced_starlette(app)


def main() -> int:
    try:
        settings = load_settings()
        configure_logging(settings.observability.log_level, "api",
                          settings.observability.log_format, correlation.log_fields)
        app = create_app(settings)
    except ConfigError as exc:
        print(f"vera api: {exc}", file=sys.stderr)
        return 2

    # Each request makes a bounded number of RPCs, each within its deadline.
    serve(app, readiness_paths=frozenset({"/readyz"}),
          grace=settings.rpc.longest_deadline_seconds, listener=settings.api,
          host=settings.api_bind_host,
          port=settings.api.port, workers=1,
          # The rate limits key on the client's address (vera.api.rate_limits).
          proxy_headers=True, forwarded_allow_ips=settings.api.forwarded_allow_ips,
          log_level=settings.observability.log_level.lower(), lifespan="on",
          log_config=None, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
