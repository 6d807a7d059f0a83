"""The MCP gateway process: ``create_app`` is the documented ASGI factory.

    python -m vera.entrypoints.mcp.main
    uvicorn --factory vera.entrypoints.mcp.main:create_app

Run exactly one worker per process while metrics are enabled: the metrics registry
and its listener are process-local.
"""

from __future__ import annotations

import sys

from starlette.applications import Starlette

from vera.config import ConfigError, Settings, load_settings
from vera.gateway.app import build_app
from vera.logs import configure_logging


class UnsupportedAuthProfile(ConfigError):
    pass


def _require_local_dev(settings: Settings) -> None:
    if settings.auth_profile != "local-dev":
        raise UnsupportedAuthProfile(
            "VERA_ENVIRONMENT/VERA_MCP__JWT_SECRET: only the local-dev auth profile is served "
            "so far (VERA_ENVIRONMENT=local with no JWT or OAuth verification configured)"
        )


def create_app(settings: Settings | None = None) -> Starlette:
    """Reads the settings, refuses any profile but local-dev, and returns the ASGI app.

    The gRPC channels and the metrics listener open in the app's lifespan, inside the
    event loop that serves it.
    """
    settings = settings if settings is not None else load_settings()
    _require_local_dev(settings)
    return build_app(settings)


def main() -> int:
    try:
        settings = load_settings()
        configure_logging(settings.observability.log_level, "mcp")
        app = create_app(settings)
    except ConfigError as exc:
        print(f"vera mcp: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    uvicorn.run(
        app,
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
