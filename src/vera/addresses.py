"""Whether a host or a ``host:port`` address stays on this machine, and whether a Host
header names an address rather than a name."""

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


def is_address_host_header(host: str) -> bool:
    """A Host header (``host`` or ``host:port``) naming an IP literal or ``localhost``: what
    a kubelet probe or a Prometheus scrape sends (the pod's address). DNS rebinding needs a
    name the attacker controls, so no rebinding page can make a browser send one of these."""
    host = host.strip()
    if host.startswith("["):  # [v6] or [v6]:port
        literal, _, rest = host[1:].partition("]")
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return False
    else:
        literal, colon, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
        if colon and not port.isdigit():
            return False
    if literal.lower() == "localhost":
        return True
    try:
        ipaddress.ip_address(literal)
    except ValueError:
        return False
    return True
