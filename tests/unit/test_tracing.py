"""Tracing is on only when the standard OTEL_* variables ask for it, and then every span
leaves the process through the content filter."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

from vera.config import ConfigError
from vera.observability import tracing
from vera.observability.sampling import EntryRooted, sampler_from
from vera.observability.span_privacy import content_free


@pytest.mark.parametrize(("environ", "wanted"), [
    ({}, False),
    ({"OTEL_SERVICE_NAME": "x"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
])
def test_tracing_is_requested_only_by_the_standard_variables(environ, wanted) -> None:
    assert tracing.tracing_requested(environ) is wanted


def test_unset_tracing_adds_nothing_to_a_call_path() -> None:
    assert tracing.configure_tracing("gateway", environ={}) is False
    app = object()
    assert tracing.traced_starlette(app) is app
    assert tracing.grpc_server_interceptors() == []
    assert tracing.grpc_client_interceptors() == []
    with tracing.span("retrieval dense") as span:
        assert not span.is_recording()
    assert tracing.current_trace_id() is None


@pytest.mark.parametrize(("environ", "field"), [
    ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
     "OTEL_TRACES_SAMPLER_ARG"),
])
def test_a_bad_sampler_is_refused_naming_the_variable(environ, field) -> None:
    with pytest.raises(ConfigError, match=field):
        sampler_from(environ)


def test_a_bad_protocol_is_refused_naming_the_variable() -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        tracing.configure_tracing("gateway", environ=environ)
    assert not tracing.enabled()


def test_only_an_entry_point_starts_a_trace() -> None:
    sampler = sampler_from({"OTEL_TRACES_SAMPLER": "always_on"})
    assert isinstance(sampler, EntryRooted)
    server = sampler.should_sample(None, 1, "GET /x", SpanKind.SERVER)
    background = sampler.should_sample(None, 1, "SELECT", SpanKind.CLIENT)
    assert server.decision.is_sampled() and not background.decision.is_sampled()


def test_a_span_leaves_with_names_codes_and_numbers_only() -> None:
    context = SpanContext(trace_id=1, span_id=2, is_remote=False)
    span = ReadableSpan(
        name="POST /mcp/some-id",
        context=context,
        kind=SpanKind.SERVER,
        attributes={
            "http.method": "POST", "http.route": "/mcp", "http.target": "/mcp?token=secret",
            "http.user_agent": "agent", "vera.retrieval.results": 3,
            "db.statement.parameters": "('secret',)", "enduser.id": "principal",
        },
        events=[Event("exception", {"exception.type": "ValueError",
                                    "exception.message": "the query text"})],
        status=Status(StatusCode.ERROR, "the query text"),
    )
    cleaned = content_free(span)
    assert cleaned.name == "POST /mcp"
    assert dict(cleaned.attributes) == {
        "http.method": "POST", "http.route": "/mcp", "vera.retrieval.results": 3}
    assert [dict(e.attributes) for e in cleaned.events] == [{"exception.type": "ValueError"}]
    assert cleaned.status.status_code is StatusCode.ERROR
    assert cleaned.status.description is None


def test_a_span_is_named_by_the_route_template_and_a_route_without_one_is_skipped() -> None:
    from starlette.routing import Host, Route

    async def endpoint(request):  # pragma: no cover - never called
        raise AssertionError

    routes = [Host("api.example", app=endpoint), Route("/items/{item_id}", endpoint)]
    route_of = tracing.starlette_routes(routes)
    scope = {"type": "http", "method": "GET", "path": "/items/42",
             "headers": [(b"host", b"api.example")]}
    assert route_of(scope) == "/items/{item_id}"
    assert route_of({**scope, "path": "/nowhere"}) is None
