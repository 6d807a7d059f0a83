"""Loopback ports that are free for a child process to bind a moment later."""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Ports handed out for a child to bind later come from below the kernel's ephemeral range:
# one from inside it (what binding port 0 returns) can be taken by an outgoing connection
# in the seconds before its child binds it ("Address already in use" at the gateway's
# metrics listener, seen in CI).
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 10_000


def free_port() -> int:
    """A loopback TCP port that is free now and that the kernel will not give an outgoing
    connection; any free port where the ephemeral range leaves no room below it."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 0
    for _ in range(64 if ephemeral_low > _LOWEST_PORT + 1000 else 0):
        port = random.randrange(_LOWEST_PORT, ephemeral_low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
