"""The startup rule both HTTP processes share: the unauthenticated local-dev profile serves
every caller as the local principal (on the REST API an administrator), so it binds only a
loopback address unless the operator sets that process's
``VERA_<PROCESS>__ALLOW_UNAUTHENTICATED_NON_LOOPBACK=true``, which is logged loudly.

Each process has its own override: opening the MCP server to the network does not open the
REST API's administration too.
"""

from __future__ import annotations

import logging
from typing import Literal

from vera.addresses import is_loopback_host
from vera.config import ConfigError, Settings

log = logging.getLogger(__name__)

Process = Literal["mcp", "api"]
_SERVER_NAMES = {"mcp": "MCP SERVER", "api": "REST API"}


class UnsupportedAuthProfile(ConfigError):
    pass



def refuse_unauthenticated_non_loopback(settings: Settings, process: Process) -> None:
    """Raises ``UnsupportedAuthProfile`` naming ``VERA_<PROCESS>__HOST`` where the
    local-dev profile would listen beyond this machine without the explicit override."""
    if settings.auth_profile != "local-dev":
        return
    listener, host = {
        "mcp": (settings.mcp, settings.mcp_bind_host),
        "api": (settings.api, settings.api_bind_host),
    }[process]
    if is_loopback_host(host):
        return
    prefix = f"VERA_{process.upper()}__"
    if not listener.allow_unauthenticated_non_loopback:
        raise UnsupportedAuthProfile(
            f"{prefix}HOST: the unauthenticated local-dev profile binds only a loopback "
            f"address, not {host}; configure VERA_MCP__JWT_SECRET or external OAuth, or set "
            f"{prefix}ALLOW_UNAUTHENTICATED_NON_LOOPBACK=true"
        )
    log.warning(
        "UNAUTHENTICATED %s ON A NON-LOOPBACK ADDRESS (%s): every caller on the network acts "
        "as the local principal with every capability (%sALLOW_UNAUTHENTICATED_NON_LOOPBACK"
        "=true)",
        _SERVER_NAMES[process], host, prefix,
    )
