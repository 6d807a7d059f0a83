"""OpenTelemetry traces, on only when the standard ``OTEL_*`` variables ask for them.

``configure_tracing(component)`` runs once per process (the entrypoints and `vera
serve`). Unset (no ``OTEL_TRACES_EXPORTER`` and no OTLP endpoint, or
``OTEL_SDK_DISABLED=true``), it imports nothing of the SDK and every helper here returns
at once: no interceptor, no middleware, no span. Set, the process exports over OTLP
(``OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL``: ``http/protobuf``, the default, or ``grpc``;
endpoint, headers, timeout and TLS from the exporters' own variables), samples per
``OTEL_TRACES_SAMPLER`` / ``…_ARG`` (default ``parentbased_always_on``), names itself
``OTEL_SERVICE_NAME`` (default ``vera-<component>``), and every span passes the content
filter (``span_privacy``) on its way out.

A trace starts only where a request enters (an HTTP front, a gRPC server): background
loops (the change-log tailer, the pack sweeper, listeners) start no trace of their own,
so an idle stack exports nothing. The instrumentations are the maintained ones: ASGI
(both HTTP fronts), gRPC (every server and channel of ``vera.rpc``), asyncpg (every
statement a service runs); the MCP SDK's own span per message is the gateway's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace

from vera.config import ConfigError

PROTOCOLS = ("http/protobuf", "grpc")
PROBES = "healthz,readyz,livez"
_TRUE = "true"

# Set once by configure_tracing; None: tracing is off and every helper is a no-op.
_provider: Any = None
_tracer: trace.Tracer = trace.NoOpTracer()


def tracing_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables ask this process to export traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == _TRUE:
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    if exporter:
        return True
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def enabled() -> bool:
    return _provider is not None


def _protocol(environ: Mapping[str, str]) -> str:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = environ.get(name, "").strip().lower()
        if value:
            if value not in PROTOCOLS:
                raise ConfigError(f"{name}: one of {', '.join(PROTOCOLS)}")
            return value
    return PROTOCOLS[0]


def _exporter(protocol: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter()


def configure_tracing(
    component: str, *, environ: Mapping[str, str] = os.environ, exporter: Any = None
) -> bool:
    """Turns tracing on for this process when the variables ask for it; whether it did.
    ``exporter``: where spans go instead of OTLP (tests). A bad variable raises
    ConfigError naming it."""
    global _provider, _tracer
    if _provider is not None:
        return True
    if exporter is None and not tracing_requested(environ):
        return False
    exporter_name = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter is None and exporter_name != "otlp":
        raise ConfigError("OTEL_TRACES_EXPORTER: otlp or none")
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from vera.observability.sampling import sampler_from
    from vera.observability.span_privacy import ContentFreeExporter

    sampler = sampler_from(environ)
    inner = exporter if exporter is not None else _exporter(_protocol(environ))
    name = environ.get("OTEL_SERVICE_NAME", "").strip() or f"vera-{component}"
    resource = Resource.create({SERVICE_NAME: name})
    provider = TracerProvider(resource=resource, sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(ContentFreeExporter(inner)))
    trace.set_tracer_provider(provider)
    _provider = provider
    _tracer = provider.get_tracer("vera")
    return True


def instrument_database() -> None:
    """Every asyncpg statement of this process becomes a span (its SQL, never its
    parameters), under the call that ran it."""
    if _provider is None:
        return
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

    instrumentor = AsyncPGInstrumentor(capture_parameters=False)
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=_provider)


def flush(timeout_millis: int = 5000) -> None:
    """Exports what is buffered (a process about to end)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis)


def grpc_server_interceptors() -> list[Any]:
    """The server span of every call (continuing the caller's trace from its metadata)."""
    if _provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    return [aio_server_interceptor(
        tracer_provider=_provider, filter_=filters.negate(filters.health_check()))]


def grpc_client_interceptors() -> list[Any]:
    """The client span of every call; the trace context travels in its metadata."""
    if _provider is None:
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors, filters

    return list(aio_client_interceptors(
        tracer_provider=_provider, filter_=filters.negate(filters.health_check())))


RouteOf = Callable[[Mapping[str, Any]], str | None]


def traced_starlette(app: Any) -> Any:
    """``app`` (Starlette) inside the ASGI server span (continuing a ``traceparent``
    header), named by the route template it matched, never by the path a client sent,
    which may carry ids. Probes start no trace."""
    if _provider is None:
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    route_of = starlette_routes(app.routes)

    def details(scope: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        method = str(scope.get("method") or "HTTP")
        route = route_of(scope)
        if route is None:
            return method, {}
        return f"{method} {route}", {"http.route": route}

    app.add_middleware(
        OpenTelemetryMiddleware,
        excluded_urls=PROBES,
        default_span_details=details,
        exclude_spans=["receive", "send"],
        tracer_provider=_provider,
    )
    return app


def starlette_routes(routes: Sequence[Any]) -> RouteOf:
    """``route_of`` for a Starlette app's routes: the template the request matches."""
    from starlette.routing import Match

    def route_of(scope: Mapping[str, Any]) -> str | None:
        for route in routes:
            match, _ = route.matches(dict(scope))
            template = getattr(route, "path", None)  # a Host route has none
            if match is Match.FULL and template is not None:
                return str(template)
        return None

    return route_of


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """An internal span (a retrieval stage) under the current one; numbers and codes
    only. Off, it yields a span that records nothing and costs one check."""
    if _provider is None:
        yield trace.INVALID_SPAN
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current


def current_trace_id() -> str | None:
    """The current sampled trace's id (32 hex digits), or None."""
    if _provider is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return trace.format_trace_id(context.trace_id)


def mark_rpc_status(code_value: int, code_name: str) -> None:
    """The gRPC status on the server span: the gRPC instrumentation does not see a status
    given with ``abort_with_status``, which every VERA server uses."""
    if _provider is None:
        return
    current = trace.get_current_span()
    current.set_attribute("rpc.grpc.status_code", code_value)
    if code_name != "OK":
        current.set_status(trace.StatusCode.ERROR)


def reset_for_tests() -> None:
    """Turns tracing off again (a test that turned it on)."""
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = None
    _tracer = trace.NoOpTracer()
