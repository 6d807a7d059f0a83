"""`vera.stack.ports.free_port` hands out ports an outgoing connection cannot take first."""

from __future__ import annotations

import socket
from pathlib import Path

from vera.stack.ports import free_port


def test_a_free_port_is_bindable_and_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(port < low for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
