"""Bounded Prometheus metrics for tool calls, served on their own listener.

Labels are the registered tool name and success/error, nothing else: no principal,
project, query or unknown requested name ever becomes a label. Degraded answers (a
retrieval answered by its lexical leg alone) are counted per tool as well. The registry is
process-local, so run one ASGI worker per process while metrics are enabled.

The listener answers only a Host that is an address (``vera.addresses``), as Prometheus
sends when it scrapes the pod's address; a name (a DNS-rebinding page) is 421.
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

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from vera.addresses import is_address_host_header
from vera.gateway.schemas import DEGRADED_MODE

log = logging.getLogger(__name__)

OUTCOMES = ("success", "error")


class ToolMetrics:
    def __init__(self, tool_names: Iterable[str]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        calls = Counter(
            "vera_mcp_tool_calls",
            "MCP tool calls by registered tool and outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        duration = Histogram(
            "vera_mcp_tool_duration_seconds",
            "MCP tool call latency by registered tool and outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        degraded = Counter(
            "vera_mcp_degraded_answers",
            "Answers saying retrieval_mode=lexical_only (the lexical leg alone), by tool; "
            "knowledge_get_context_pack counts reads of packs persisted so.",
            ("tool",),
            registry=self.registry,
        )
        names = tuple(tool_names)
        # Every series exists from the start, so a scrape shows all tools at once; a call
        # then updates its pair without looking the labels up again.
        self._series = {
            (tool, outcome): (calls.labels(tool, outcome), duration.labels(tool, outcome))
            for tool in names
            for outcome in OUTCOMES
        }
        self._degraded = {tool: degraded.labels(tool) for tool in names}

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        series = self._series.get((tool, outcome))
        if series is None:
            return  # never let a caller-chosen name become a label
        calls, duration = series
        calls.inc()
        duration.observe(seconds)

    def observe_answer(self, tool: str, data: object) -> None:
        """Counts ``data`` (a tool's structured answer) when it says it was degraded."""
        counter = self._degraded.get(tool)
        if counter is not None and isinstance(data, dict):
            if data.get("retrieval_mode") == DEGRADED_MODE:
                counter.inc()


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


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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


def start_listener(metrics: ToolMetrics, host: str, port: int) -> MetricsListener:
    """Serves ``metrics.registry`` on a dedicated scrape-only listener (port 0 picks one)."""

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = make_server(host, port, _address_hosts_only(make_wsgi_app(metrics.registry)),
                         Server, handler_class=_QuietHandler)
    thread = Thread(target=server.serve_forever, daemon=True, name="metrics")
    thread.start()
    listener = MetricsListener(server, thread)
    log.info("metrics listener on %s:%d", host, listener.port)
    return listener
