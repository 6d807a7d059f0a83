"""The MCP surface per profile, as the official client sees it, against a committed golden.

Tool names, input and output schemas, annotations, ``_meta``, the server instructions and
version: any change fails here until it is made on purpose by regenerating the golden (and
the README's tool table, generated from it):

    VERA_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/gateway/test_surface_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from vera.gateway.profiles import PROFILES

GOLDEN = Path(__file__).with_name("surface_golden.json")
README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- mcp-tools:begin (generated: tests/gateway/test_surface_golden.py) -->", (
    "<!-- mcp-tools:end -->"
)
UPDATE = os.environ.get("VERA_UPDATE_GOLDEN") == "1"


async def _profile_surface(start_gateway, profile: str) -> dict[str, Any]:
    async with start_gateway(tool_profile=profile, quota_enabled=False) as gw:
        async with Client(gw.url) as client:
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


def _tool_table(surface: dict[str, Any]) -> str:
    """The README's tool table: one row per tool, with the profiles that list it."""
    rows = [
        "| tool | profiles | class | quota | read-only | idempotent | destructive |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, tool in surface["tools"].items():
        profiles = ", ".join(p for p in PROFILES if name in surface["profiles"][p]["tools"])
        meta, hints = tool.get("_meta", {}), tool.get("annotations", {})
        flags = [
            "yes" if hints.get(hint) else "no"
            for hint in ("readOnlyHint", "idempotentHint", "destructiveHint")
        ]
        rows.append(
            f"| `{name}` | {profiles} | {meta.get('dev.vera/authorization_class', '')} | "
            f"{meta.get('dev.vera/quota_bucket', '')} | " + " | ".join(flags) + " |"
        )
    return "\n".join(rows)


def _readme_with(table: str) -> str:
    text = README.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + table + "\n" + text[end:]


@pytest.fixture
async def surface(start_gateway) -> dict[str, Any]:
    return _merged({p: await _profile_surface(start_gateway, p) for p in PROFILES})


async def test_the_mcp_surface_matches_the_golden(surface) -> None:
    if UPDATE:
        GOLDEN.write_text(json.dumps(surface, indent=2, sort_keys=True) + "\n")
    assert surface == json.loads(GOLDEN.read_text())


def test_the_readme_tool_table_is_generated_from_the_golden() -> None:
    golden = json.loads(GOLDEN.read_text())
    expected = _readme_with(_tool_table(golden))
    if UPDATE:
        README.write_text(expected)
    assert README.read_text() == expected
