"""Bounded Prometheus metrics for tool calls, served on their own listener.

Labels are the registered tool name and success/error, nothing else: no principal,
project, query or unknown requested name ever becomes a label. The registry is
process-local, so run one ASGI worker per process while metrics are enabled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

log = logging.getLogger(__name__)

OUTCOMES = ("success", "error")


class ToolMetrics:
    def __init__(self, tool_names: Iterable[str]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._tools = frozenset(tool_names)
        self._calls = Counter(
            "vera_mcp_tool_calls",
            "MCP tool calls by registered tool and outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        self._duration = Histogram(
            "vera_mcp_tool_duration_seconds",
            "MCP tool call latency by registered tool and outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        # Pre-create every series so a scrape shows all tools from the start.
        for tool in self._tools:
            for outcome in OUTCOMES:
                self._calls.labels(tool, outcome)
                self._duration.labels(tool, outcome)

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        if tool not in self._tools or outcome not in OUTCOMES:
            return  # never let a caller-chosen name become a label
        self._calls.labels(tool, outcome).inc()
        self._duration.labels(tool, outcome).observe(seconds)


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


def start_listener(metrics: ToolMetrics, host: str, port: int) -> MetricsListener:
    """Serves ``metrics.registry`` on a dedicated scrape-only listener (port 0 picks one)."""
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    listener = MetricsListener(server, thread)
    log.info("metrics listener on %s:%d", host, listener.port)
    return listener
