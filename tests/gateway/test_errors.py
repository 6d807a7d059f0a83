"""Service failures map to the seed's error contract in one table; nothing leaks."""

from __future__ import annotations

import pytest
from harness import mcp_client, without_ids

from vera.config import RpcSettings


async def test_ambiguous_project_carries_candidates(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        error = await call_error(
            client, "knowledge_get_context", {"query": "q", "project": "ambiguous"}
        )
    assert error.code == -32004
    assert without_ids(error.data) == {
        "code": "ambiguous_project", "candidates": ["acme", "globex"],
    }


async def test_project_out_of_scope(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        error = await call_error(client, "knowledge_search", {"query": "q", "project": "forbidden"})
    assert error.code == -32005
    assert without_ids(error.data) == {"code": "project_out_of_scope"}


async def test_missing_pack_is_expired_context_pack(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        error = await call_error(client, "knowledge_get_context_pack", {"pack_id": "nope"})
        assert (error.code, without_ids(error.data)) == (-32006, {"code": "expired_context_pack"})
        error = await call_error(
            client,
            "knowledge_feedback",
            {"context_pack_id": "nope", "result_ref": "r", "signal": "up"},
        )
        assert without_ids(error.data) == {"code": "expired_context_pack"}


async def test_service_invalid_input_keeps_field_and_reason(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        error = await call_error(
            client, "knowledge_proposal_report", {"task_ref": "t", "cursor": "bad-cursor"}
        )
    assert error.code == -32602
    assert without_ids(error.data) == {
        "code": "invalid_input", "field": "cursor", "reason": "bad_cursor",
    }


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_unexpected_failure_is_redacted_internal_error(gateway, fakes, call_error, mode):
    fakes.rec.boom.add("Search")
    try:
        async with mcp_client(gateway.url, mode=mode) as client:
            error = await call_error(client, "knowledge_search", {"query": "q"})
    finally:
        fakes.rec.boom.discard("Search")
    assert error.code == -32603
    assert without_ids(error.data) == {"code": "internal_error"}
    assert "secret" not in error.message and "Search" not in error.message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_errors_are_protocol_errors_on_both_protocol_eras(gateway, call_error, mode):
    async with mcp_client(gateway.url, mode=mode) as client:
        error = await call_error(client, "knowledge_get_context", {"query": "q", "limit": 0})
    assert error.code == -32602
    assert without_ids(error.data) == {
        "code": "invalid_input", "field": "limit", "reason": "below_minimum",
    }


async def test_unknown_and_hidden_tools_are_refused_alike(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        for name in ("no_such_tool", "knowledge_create_snapshot", "memory_search"):
            error = await call_error(client, name, {"query": "q"})
            assert error.code == -32602
            assert without_ids(error.data) == {
                "code": "invalid_input",
                "field": "name",
                "reason": "unknown_tool",
            }


async def test_unreachable_service_is_internal_error_unavailable(start_gateway, call_error):
    rpc = RpcSettings(deadline_seconds=2, retrieval_deadline_seconds=2)
    async with start_gateway(address="127.0.0.1:9", rpc=rpc) as gw, mcp_client(gw.url) as client:
        error = await call_error(client, "knowledge_search", {"query": "q"})
    assert error.code == -32603
    assert without_ids(error.data) == {"code": "internal_error", "reason": "unavailable"}


def test_a_task_context_field_is_named_as_the_tool_argument() -> None:
    """knowledge_propose and knowledge_proposal_report take the task context flat
    (``task_ref``); the service names it ``context.task_ref``: the error names what the
    client sent (issue 41)."""
    from gateway.errors import from_vera_error
    from vera.errors import InvalidInput

    error = from_vera_error(InvalidInput("context.task_ref", "too long", reason="too_long"))
    assert without_ids(error.error.data) == {"code": "invalid_input", "field": "task_ref",
                                             "reason": "too_long"}
    assert "context." not in error.error.message
