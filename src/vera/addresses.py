"""Whether a host or a ``host:port`` address stays on this machine."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP literal (brackets allowed); a name is never trusted."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_address(address: str) -> bool:
    """The same for a gRPC-style ``host:port`` (``[::1]:50051``, ``127.0.0.1:0``)."""
    return is_loopback_host(address.rsplit(":", 1)[0])
