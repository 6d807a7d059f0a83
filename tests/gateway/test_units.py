"""Small pieces of the gateway without a server: bounds, quota windows, the error table."""

from __future__ import annotations

import pytest
from harness import without_ids

from vera.errors import (
    AmbiguousProject,
    ExpiredContextPack,
    InvalidInput,
    NotFound,
    ProjectOutOfScope,
    QuotaExceeded,
    Unauthenticated,
    Unauthorized,
    Unavailable,
    UnsupportedVersion,
    VeraError,
)
from vera.gateway.bounds import parse_timestamp
from vera.gateway.errors import ERROR_CODES, from_vera_error, invalid_input, jsonrpc_error
from vera.gateway.metrics import ToolMetrics
from vera.quota import BucketLimit, InMemoryQuotaStore, QuotaPolicy


@pytest.mark.parametrize(
    ("error", "code", "data"),
    [
        (
            InvalidInput("limit", reason="too_big"),
            -32602,
            {"code": "invalid_input", "field": "limit", "reason": "too_big"},
        ),
        (
            AmbiguousProject(candidates=["a", "b"]),
            -32004,
            {"code": "ambiguous_project", "candidates": ["a", "b"]},
        ),
        (ProjectOutOfScope(), -32005, {"code": "project_out_of_scope"}),
        (ExpiredContextPack(), -32006, {"code": "expired_context_pack"}),
        (UnsupportedVersion(), -32007, {"code": "unsupported_version"}),
        (QuotaExceeded(bucket="read"), -32003, {"code": "quota_exceeded", "bucket": "read"}),
        (
            Unauthorized(required_scope="memory:propose"),
            -32002,
            {"code": "unauthorized", "required_scope": "memory:propose"},
        ),
        (Unauthenticated(), -32001, {"code": "unauthenticated"}),
        (
            Unavailable("db down at 10.0.0.1"),
            -32603,
            {"code": "internal_error", "reason": "unavailable"},
        ),
        (NotFound("fact x"), -32603, {"code": "internal_error"}),
        (VeraError("boom"), -32603, {"code": "internal_error"}),
    ],
)
def test_one_table_maps_service_reasons(error, code, data):
    mapped = from_vera_error(error)
    assert (mapped.code, without_ids(mapped.data)) == (code, data)
    if data["code"] != "invalid_input":
        assert mapped.message == ERROR_CODES[data["code"]][1]


def test_an_invalid_input_message_names_field_reason_and_suggestions_never_the_value():
    refused = InvalidInput(
        "predicate",
        "not an allowed predicate: 'owns_the_secret_db'",
        reason="unknown_predicate",
        candidates="owned_by,owns",
    )
    mapped = from_vera_error(refused)
    assert without_ids(mapped.data) == {
        "code": "invalid_input",
        "field": "predicate",
        "reason": "unknown_predicate",
        "candidates": ["owned_by", "owns"],
    }
    for named in ("predicate", "unknown_predicate", "owned_by", "owns"):
        assert named in mapped.message
    assert "owns_the_secret_db" not in mapped.message
    # Two refusals of different fields read differently, not as one generic sentence.
    other = from_vera_error(InvalidInput("limit", reason="above_maximum"))
    assert "limit" in other.message and "above_maximum" in other.message
    assert other.message != mapped.message
    # A name the client chose that is not a plain name stays out of the message.
    odd = invalid_input("x\u202e<script>", "unknown_argument")
    assert odd.data["field"] == "x\u202e<script>"
    assert "<script>" not in odd.message and odd.message == ERROR_CODES["invalid_input"][1]


def test_a_refusal_before_the_sdk_names_the_field_and_reason_too():
    body = jsonrpc_error("invalid_input", 7, field="content-type", reason="unsupported_media_type")
    assert without_ids(body["error"]["data"]) == {
        "code": "invalid_input",
        "field": "content-type",
        "reason": "unsupported_media_type",
    }
    assert "content-type" in body["error"]["message"]
    assert "unsupported_media_type" in body["error"]["message"]


def test_timestamps_parse_as_iso8601_utc():
    assert parse_timestamp("2024-05-01T12:00:00Z").isoformat() == "2024-05-01T12:00:00+00:00"
    assert parse_timestamp("2024-05-01").isoformat() == "2024-05-01T00:00:00+00:00"
    assert parse_timestamp("2024-05-01T12:00:00-05:00").hour == 17
    for bad in ("yesterday", "2024-02-30", "12:00", "", "2024-05-01T25:00"):
        assert parse_timestamp(bad) is None, bad


async def test_fixed_window_quota_is_per_principal_and_bucket():
    now = [600.0]
    clock = lambda: now[0]  # noqa: E731
    policy = QuotaPolicy(
        {"read": BucketLimit(2, 60), "context": BucketLimit(1, 60)},
        InMemoryQuotaStore(clock),
        clock=clock,
    )
    assert await policy.charge("alice", "read") is None
    assert await policy.charge("alice", "read") is None
    refusal = await policy.charge("alice", "read")
    assert refusal is not None and refusal.bucket == "read"
    assert refusal.retry_after_seconds == 60
    assert await policy.charge("bob", "read") is None
    assert await policy.charge("alice", "context") is None
    now[0] = 659.5
    refused = await policy.charge("alice", "read")
    assert refused is not None and refused.retry_after_seconds == 1
    now[0] = 660.0
    assert await policy.charge("alice", "read") is None
    disabled = QuotaPolicy(
        {"read": BucketLimit(1, 60)}, InMemoryQuotaStore(clock), enabled=False, clock=clock
    )
    for _ in range(3):
        assert await disabled.charge("alice", "read") is None


def test_metrics_ignore_unregistered_names():
    metrics = ToolMetrics(["knowledge_search"])
    metrics.observe("knowledge_search", "success", 0.01)
    metrics.observe("evil_name", "success", 0.01)
    metrics.observe("knowledge_search", "weird", 0.01)
    names = {s.labels.get("tool") for m in metrics.registry.collect() for s in m.samples}
    assert names == {"knowledge_search"}
