"""Hostile values through the real MCP client answer ``invalid_input`` naming the field,
never ``internal_error``: an ISO-8601 instant whose offset carries it outside the
Timestamp range, and NUL in text (refused by every gRPC server, the fakes' included)."""

from __future__ import annotations

import pytest
from harness import mcp_client, without_ids


@pytest.mark.parametrize(
    "as_of", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "10000-01-01"]
)
async def test_instants_outside_the_timestamp_range_are_invalid_input(
    gateway, call_error, as_of: str
) -> None:
    async with mcp_client(gateway.url) as client:
        error = await call_error(
            client, "knowledge_explain_fact", {"fact_key": "f", "as_of": as_of}
        )
    assert error.code == -32602
    assert (error.data["code"], error.data["field"]) == ("invalid_input", "as_of")


async def test_nul_in_text_is_invalid_input_naming_the_field(gateway, call_error) -> None:
    arguments = {
        "subject": "billing\x00api",
        "predicate": "owned_by",
        "object": "team-pay",
        "runtime": "claude-code",
        "task_ref": "T-1",
    }
    async with mcp_client(gateway.url) as client:
        error = await call_error(client, "knowledge_propose", arguments)
    assert error.code == -32602
    assert without_ids(error.data) == {
        "code": "invalid_input",
        "field": "subject",
        "reason": "invalid_character",
    }
