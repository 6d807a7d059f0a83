"""The MCP surface per profile, as the official client sees it, against a committed golden.

Tool names, input and output schemas, annotations, ``_meta``, the server instructions and
version: any change fails here until it is made on purpose by regenerating the golden, which
also rewrites the tool reference generated from it (docs/tools.md, checked by
test_tool_docs.py; `scripts/gen-tool-docs` alone does the same from the committed golden):

    VERA_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/gateway/test_surface_golden.py
"""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path
from typing import Any

import pytest
from harness import mcp_client

from vera.gateway.profiles import PROFILES

GOLDEN = Path(__file__).with_name("surface_golden.json")
GENERATOR = Path(__file__).resolve().parents[2] / "scripts" / "gen-tool-docs"
UPDATE = os.environ.get("VERA_UPDATE_GOLDEN") == "1"


async def _profile_surface(start_gateway, profile: str) -> dict[str, Any]:
    async with start_gateway(tool_profile=profile, quota_enabled=False) as gw:
        async with mcp_client(gw.url) as client:
            tools = (await client.list_tools()).tools
            server = client.server_info
            instructions = client.instructions
    return {
        "server": {"name": server.name, "version": server.version},
        "instructions": instructions,
        "tools": {
            tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
            for tool in tools
        },
    }


def _merged(per_profile: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One entry per tool: a tool listed by several profiles must be the same in each."""
    surface: dict[str, Any] = {"profiles": {}, "tools": {}}
    for profile, seen in per_profile.items():
        surface["profiles"][profile] = {
            "server": seen["server"],
            "instructions": seen["instructions"],
            "tools": sorted(seen["tools"]),
        }
        for name, tool in seen["tools"].items():
            assert surface["tools"].setdefault(name, tool) == tool, (profile, name)
    surface["tools"] = dict(sorted(surface["tools"].items()))
    return surface


@pytest.fixture
async def surface(start_gateway) -> dict[str, Any]:
    return _merged({p: await _profile_surface(start_gateway, p) for p in PROFILES})


async def test_the_mcp_surface_matches_the_golden(surface) -> None:
    if UPDATE:
        GOLDEN.write_text(json.dumps(surface, indent=2, sort_keys=True) + "\n")
        docs = runpy.run_path(str(GENERATOR))
        docs["PAGE"].write_text(docs["render"](surface))
    assert surface == json.loads(GOLDEN.read_text())

