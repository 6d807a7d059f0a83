"""The one rule for what a span may carry out of a VERA process: what an operator needs to
follow a call (names, codes, counts, scores, durations), never what a caller sent or was
sent back (a query, a prompt, fact text, a token, an API key, a principal id).

Every span passes ``ContentFreeExporter`` on its way to OTLP, whichever instrumentation
made it, so a library that starts recording something new cannot leak it:

- attributes: only the keys listed here (the HTTP, gRPC, database, MCP and GenAI
  conventions' names for methods, routes, codes and peers) and VERA's own ``vera.*``
  numbers; anything else (a URL with its query, a header, a user agent, statement
  parameters, a message's content) is dropped;
- an HTTP server span is named by its method and route template, never its path;
- a status keeps its code, never its description (an exception's or a peer's message);
- an event keeps only an exception's type; links keep their context, not attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, SpanKind, Status

ALLOWED_ATTRIBUTES = frozenset({
    # HTTP (the older and the stable conventions): method, route, status, protocol, the
    # server's own address and the peer's address.
    "http.method", "http.request.method", "http.route", "http.status_code",
    "http.response.status_code", "http.scheme", "url.scheme", "http.flavor",
    "network.protocol.name", "network.protocol.version", "http.server_name", "http.host",
    "server.address", "server.port", "net.host.name", "net.host.port", "net.peer.ip",
    "net.peer.port", "net.peer.name", "client.address", "client.port",
    "network.peer.address", "network.peer.port", "network.transport",
    # gRPC: service, method, status.
    "rpc.system", "rpc.service", "rpc.method", "rpc.grpc.status_code",
    # PostgreSQL: the statement (parameters never: they are $n placeholders) and where.
    "db.system", "db.system.name", "db.name", "db.namespace", "db.user", "db.statement",
    "db.query.text", "db.operation.name",
    # MCP and GenAI: the method, the registered tool, the protocol, the JSON-RPC outcome.
    "mcp.method.name", "mcp.protocol.version", "jsonrpc.request.id",
    "jsonrpc.protocol.version", "rpc.response.status_code", "gen_ai.operation.name",
    "gen_ai.tool.name", "gen_ai.request.top_k", "gen_ai.data_source.id",
    "error.type",
})
# VERA's own attributes: counts, scores, stage names, stable codes (vera.observability
# callers set nothing else).
ALLOWED_PREFIXES = ("vera.",)
_EXCEPTION = "exception"
_EXCEPTION_TYPE = "exception.type"


def allowed(key: str) -> bool:
    return key in ALLOWED_ATTRIBUTES or key.startswith(ALLOWED_PREFIXES)


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (attributes or {}).items() if allowed(key)}


def _name(span: ReadableSpan, attributes: Mapping[str, Any]) -> str:
    """An HTTP server span by its method and route template: its path may carry ids."""
    method = attributes.get("http.request.method") or attributes.get("http.method")
    if span.kind is not SpanKind.SERVER or method is None:
        return span.name
    route = attributes.get("http.route")
    return f"{method} {route}" if route else str(method)


def _events(events: Sequence[Event]) -> list[Event]:
    kept = []
    for event in events:
        if event.name != _EXCEPTION:
            continue
        kind = (event.attributes or {}).get(_EXCEPTION_TYPE)
        kept.append(Event(_EXCEPTION, {_EXCEPTION_TYPE: kind} if kind else {}, event.timestamp))
    return kept


def content_free(span: ReadableSpan) -> ReadableSpan:
    """``span`` with only what the rule above lets out."""
    attributes = _attributes(span.attributes)
    return ReadableSpan(
        name=_name(span, attributes),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=_events(span.events),
        links=[Link(link.context) for link in span.links],
        kind=span.kind,
        status=Status(span.status.status_code),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class ContentFreeExporter(SpanExporter):
    """Hands ``inner`` each span with only what may leave the process."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([content_free(span) for span in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)
