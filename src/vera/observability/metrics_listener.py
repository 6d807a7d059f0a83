"""The scrape-only Prometheus listener every VERA process serves its registry on: the
gateway's tool metrics and each gRPC service's (``service_metrics``). It is its own
port, never the process's API port, so no Service, Ingress or client route reaches it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

log = logging.getLogger(__name__)


@dataclass
class MetricsListener:
    server: WSGIServer
    thread: Thread

    @property
    def port(self) -> int:
        return self.server.server_port

    async def stop(self) -> None:
        await asyncio.to_thread(self.server.shutdown)
        self.server.server_close()


def start_listener(registry: CollectorRegistry, host: str, port: int) -> MetricsListener:
    """Serves ``registry`` on a dedicated scrape-only listener (port 0 picks one)."""
    server, thread = start_http_server(port, addr=host, registry=registry)
    listener = MetricsListener(server, thread)
    log.info("metrics listener on %s:%d", host, listener.port)
    return listener
