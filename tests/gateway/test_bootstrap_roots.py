"""knowledge_bootstrap for multi-root workspaces and worktrees (GUIDE §Repository Identity):
each root resolves on its own, with its own branch; a detached HEAD sends none."""

from __future__ import annotations

import pytest
from harness import mcp_client
from mcp.shared.exceptions import MCPError


async def bootstrap(gateway, arguments: dict) -> dict:
    async with mcp_client(gateway.url) as client:
        result = await client.call_tool("knowledge_bootstrap", arguments)
    assert not result.is_error
    return result.structured_content


async def test_each_root_resolves_on_its_own(gateway, fakes):
    data = await bootstrap(gateway, {"roots": [
        {"repository": "https://github.com/acme/billing", "branch": "feature/a"},
        {"repository": "https://github.com/acme/many"},
        {"repository": "https://github.com/acme/billing", "branch": "main"},
    ]})
    first, second, third = data["roots"]
    assert (first["status"], first["project"]["slug"], first["branch"]) == (
        "selected", "acme", "feature/a")
    assert (second["status"], second["project"], second["branch"]) == (
        "selection_required", None, None)
    assert [c["slug"] for c in second["candidates"]] == ["acme", "me"]
    # Two worktrees of one repository: same remote identity, each its own branch.
    assert third["canonical_repository"] == first["canonical_repository"]
    assert third["branch"] == "main"
    requested = [r.repository for r in fakes.rec.requests["ResolveRepository"]]
    assert requested[-3:] == ["https://github.com/acme/billing", "https://github.com/acme/many",
                              "https://github.com/acme/billing"]
    # Without roots the single-repository field is still there and roots is empty.
    assert data["repository"]["status"] == "unmapped"
    assert (await bootstrap(gateway, {}))["roots"] == []


@pytest.mark.parametrize("roots", [
    [],
    [{"branch": "main"}],
    [{"repository": "https://github.com/acme/billing", "path": "/home/me/src"}],
    [{"repository": "https://github.com/acme/billing", "branch": ""}],
    "https://github.com/acme/billing",
    [{"repository": "x"}] * 17,
])
async def test_bad_roots_are_invalid_input(gateway, roots):
    async with mcp_client(gateway.url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("knowledge_bootstrap", {"roots": roots})
    assert caught.value.error.data["code"] == "invalid_input"
    assert caught.value.error.data["field"] == "roots"
