"""``tools/list`` answers from the caller's token (ADR 0019): a credential without the
persist scope (memory:snapshot) sees knowledge_get_context as read-only, because for it
the call cannot write (the guard refuses persist=true); that is what lets a runtime that
approves per tool (Codex's ``writes`` mode) run grounding without a prompt. A full-scope
token sees the golden surface unchanged (tests/gateway/surface_golden.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import local_token, mcp_client, without_ids
from mcp import MCPError

from vera.stack.launcher import EVERY_SCOPE

GOLDEN = json.loads(Path(__file__).with_name("surface_golden.json").read_text())
WITHOUT_PERSIST = tuple(scope for scope in EVERY_SCOPE if scope != "memory:snapshot")
PERSISTS_ON_REQUEST = "knowledge_get_context"


async def listed(url: str, scopes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    async with mcp_client(url, local_token(scopes=scopes)) as client:
        tools = (await client.list_tools()).tools
    return {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools}


@pytest.mark.parametrize("profile", ["coding", "advanced"])
async def test_a_token_that_cannot_persist_sees_get_context_read_only(
        start_gateway, profile) -> None:
    async with start_gateway(tool_profile=profile, quota_enabled=False) as gw:
        narrow = await listed(gw.url, WITHOUT_PERSIST)
        read_only = await listed(gw.url, ("memory:read",))
    assert narrow == read_only
    annotations = narrow[PERSISTS_ON_REQUEST]["annotations"]
    assert (annotations["readOnlyHint"], annotations["destructiveHint"]) == (True, False)
    golden = GOLDEN["tools"][PERSISTS_ON_REQUEST]
    assert golden["annotations"]["readOnlyHint"] is False
    # Only those two hints differ from the golden, and no other tool changes at all: the
    # write tools stay writes (a client still asks, and the server refuses them anyway).
    assert {**narrow[PERSISTS_ON_REQUEST], "annotations": golden["annotations"]} == golden
    others = {name: tool for name, tool in narrow.items() if name != PERSISTS_ON_REQUEST}
    assert others == {name: GOLDEN["tools"][name] for name in others}


@pytest.mark.parametrize("profile", ["coding", "advanced"])
async def test_a_token_that_can_persist_sees_the_golden_surface(start_gateway, profile) -> None:
    async with start_gateway(tool_profile=profile, quota_enabled=False) as gw:
        full = await listed(gw.url, EVERY_SCOPE)
    assert full == {name: GOLDEN["tools"][name] for name in GOLDEN["profiles"][profile]["tools"]}


async def test_the_server_refuses_what_a_token_that_cannot_persist_would_write(
        start_gateway) -> None:
    """The read-only annotation is true because the guard holds it: persist=true and a
    snapshot are refused ``unauthorized`` naming memory:snapshot, and the ephemeral call
    answers."""
    async with start_gateway(tool_profile="advanced", quota_enabled=False) as gw:
        async with mcp_client(gw.url, local_token(scopes=WITHOUT_PERSIST)) as client:
            grounded = await client.call_tool(PERSISTS_ON_REQUEST, {"query": "db"})
            assert not grounded.is_error, grounded.content
            for tool, arguments in [(PERSISTS_ON_REQUEST, {"query": "db", "persist": True}),
                                    ("knowledge_create_snapshot", {"project": "acme"})]:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(tool, arguments)
                assert without_ids(refused.value.data) == {
                    "code": "unauthorized", "required_scope": "memory:snapshot"}, tool
