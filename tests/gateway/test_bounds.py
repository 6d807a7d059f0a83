"""Input bounds are enforced server-side and answered as invalid_input naming the field.

The gateway alone, in front of fake services; tests/isolation/test_bounds_real.py walks every
published bound through the real services.
"""

from __future__ import annotations

import pytest
from harness import mcp_client

from vera.rpc.timestamps import from_timestamp

CTX = "knowledge_get_context"

BAD_CALLS = [
    (CTX, {"query": ""}, "query", "too_short"),
    (CTX, {"query": "x" * 8193}, "query", "too_long"),
    (CTX, {}, "query", "required"),
    (CTX, {"query": "q", "limit": 0}, "limit", "below_minimum"),
    (CTX, {"query": "q", "limit": 51}, "limit", "above_maximum"),
    (CTX, {"query": "q", "limit": "5"}, "limit", "not_an_integer"),
    (CTX, {"query": "q", "limit": True}, "limit", "not_an_integer"),
    (CTX, {"query": "q", "token_budget": 99}, "token_budget", "below_minimum"),
    (CTX, {"query": "q", "token_budget": 32001}, "token_budget", "above_maximum"),
    (CTX, {"query": "q", "as_of": "yesterday"}, "as_of", "not_iso8601"),
    (CTX, {"query": "q", "as_of": "x" * 65}, "as_of", "too_long"),
    (CTX, {"query": "q", "min_authority": 1.5}, "min_authority", "above_maximum"),
    (CTX, {"query": "q", "max_trust_tier": 5}, "max_trust_tier", "above_maximum"),
    (CTX, {"query": "q", "citation_mode": "verbose"}, "citation_mode", "not_allowed"),
    (CTX, {"query": "q", "conflict_handling": "hide"}, "conflict_handling", "not_allowed"),
    (CTX, {"query": "q", "include_predicates": ["p"] * 65}, "include_predicates", "too_many_items"),
    (CTX, {"query": "q", "exclude_predicates": ["x" * 257]}, "exclude_predicates", "bad_item"),
    (CTX, {"query": "q", "persist": "yes"}, "persist", "not_a_boolean"),
    (CTX, {"query": "q", "project": "p" * 513}, "project", "too_long"),
    (
        CTX,
        {"query": "q", "snapshot_id": "snap-1", "as_of": "2025-01-01T00:00:00Z"},
        "as_of",
        "conflicts_with_snapshot",
    ),
    (
        "knowledge_search",
        {"query": "q", "snapshot_id": "snap-1", "known_as_of": "2025-01-01T00:00:00Z"},
        "known_as_of",
        "conflicts_with_snapshot",
    ),
    (CTX, {"query": "q", "scope_ids": ["other"]}, "scope_ids", "unknown_argument"),
    ("knowledge_search", {"query": "q", "known_as_of": "2025-13-01"}, "known_as_of", "not_iso8601"),
    (
        "knowledge_feedback",
        {"context_pack_id": "p", "result_ref": "r", "signal": "sideways"},
        "signal",
        "not_allowed",
    ),
    (
        "knowledge_feedback",
        {"context_pack_id": "p", "result_ref": "r", "signal": "up", "rank": 1},
        "rank",
        "unknown_argument",
    ),
    (
        "knowledge_propose",
        {"subject": "s" * 513, "predicate": "p", "object": "o"},
        "subject",
        "too_long",
    ),
    (
        "knowledge_propose",
        {"subject": "s", "predicate": "p", "object": "o", "evidence_text": "e" * 8001},
        "evidence_text",
        "too_long",
    ),
    (
        "knowledge_propose",
        {"subject": "s", "predicate": "p", "object": "o", "runtime": "r" * 257},
        "runtime",
        "too_long",
    ),
    ("knowledge_proposal_report", {}, "context", "required"),
    ("knowledge_proposal_report", {"task_ref": "t", "limit": 101}, "limit", "above_maximum"),
    ("knowledge_get_evidence", {"fact_key": "f", "limit": 51}, "limit", "above_maximum"),
    ("knowledge_bootstrap", {"repository": "r" * 1025}, "repository", "too_long"),
    ("knowledge_get_context_pack", {"pack_id": ""}, "pack_id", "too_short"),
]


def service_calls(fakes) -> dict[str, int]:
    return {m: len(v) for m, v in fakes.rec.requests.items() if m != "EnsureLocalPrincipal"}


@pytest.mark.parametrize(("tool", "arguments", "field", "reason"), BAD_CALLS)
async def test_out_of_bounds_is_invalid_input(
    gateway, fakes, call_error, tool, arguments, field, reason
):
    before = service_calls(fakes)
    async with mcp_client(gateway.url) as client:
        error = await call_error(client, tool, arguments)
    assert error.code == -32602
    assert error.data["code"] == "invalid_input"
    assert error.data["field"] == field
    assert error.data["reason"] == reason
    # Refused before the body: no service was asked for anything.
    assert service_calls(fakes) == before


async def test_bounds_are_inclusive_and_values_reach_the_service(gateway, fakes):
    async with mcp_client(gateway.url) as client:
        result = await client.call_tool(
            CTX,
            {
                "query": "x" * 8192,
                "limit": 50,
                "token_budget": 100,
                "min_authority": 0.0,
                "max_trust_tier": 4,
                "as_of": "2024-05-01T12:00:00+02:00",
                "include_predicates": ["p"] * 64,
                "project": "acme",
                "usage_ref": None,
            },
        )
    assert not result.is_error
    sent = fakes.rec.last("AssembleContext")
    assert (sent.limit, sent.token_budget) == (50, 100)
    assert sent.filters.HasField("min_authority") and sent.filters.min_authority == 0.0
    assert sent.filters.max_trust_tier == 4
    assert from_timestamp(sent.filters, "as_of").isoformat() == "2024-05-01T10:00:00+00:00"
    assert result.structured_content["request"]["as_of"] == "2024-05-01T10:00:00Z"


async def test_date_only_timestamps_are_accepted_as_utc_midnight(gateway, fakes):
    async with mcp_client(gateway.url) as client:
        await client.call_tool("knowledge_search", {"query": "q", "known_as_of": "2024-05-01"})
    sent = fakes.rec.last("Search")
    assert from_timestamp(sent.filters, "known_as_of").isoformat() == "2024-05-01T00:00:00+00:00"
    assert not sent.filters.HasField("as_of")
