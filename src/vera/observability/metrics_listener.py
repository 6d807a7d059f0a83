"""The scrape-only Prometheus listener every VERA process serves its registry on: the
gateway's tool metrics and each gRPC service's (``service_metrics``). It is its own
port, never the process's API port, so no Service, Ingress or client route reaches it.

It answers only a Host that is an address (``vera.addresses``), as Prometheus sends when it
scrapes the pod's address; a name (a DNS-rebinding page) is 421.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from threading import Thread
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from vera.addresses import is_address_host_header

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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


def _address_hosts_only(app: WsgiApp) -> WsgiApp:
    def checked(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not is_address_host_header(environ.get("HTTP_HOST", "")):
            start_response("421 Misdirected Request", [("Content-Type", "text/plain")])
            return [b"421 Misdirected Request\n"]
        return app(environ, start_response)

    return checked


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not worth a log line each."""


def start_listener(registry: CollectorRegistry, host: str, port: int) -> MetricsListener:
    """Serves ``registry`` on a dedicated scrape-only listener (port 0 picks one)."""

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = make_server(host, port, _address_hosts_only(make_wsgi_app(registry)),
                         Server, handler_class=_QuietHandler)
    thread = Thread(target=server.serve_forever, daemon=True, name="metrics")
    thread.start()
    listener = MetricsListener(server, thread)
    log.info("metrics listener on %s:%d", host, listener.port)
    return listener
