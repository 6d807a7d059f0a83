"""docs/tools.md is scripts/gen-tool-docs' rendering of the golden MCP surface, byte for byte,
so the tool reference cannot drift from what the gateway serves."""

from __future__ import annotations

import copy
import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from vera.gateway.profiles import PROFILES

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> SimpleNamespace:
    return SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "gen-tool-docs")))


def test_the_tool_reference_is_generated_from_the_golden() -> None:
    gen = _generator()
    expected = gen.render(json.loads(gen.GOLDEN.read_text()))
    assert (ROOT / "docs" / "tools.md").read_text() == expected, "run scripts/gen-tool-docs"


def test_every_tool_and_profile_of_the_golden_is_on_the_page() -> None:
    gen = _generator()
    golden = json.loads(gen.GOLDEN.read_text())
    assert tuple(gen.PROFILES) == tuple(PROFILES)
    page = (ROOT / "docs" / "tools.md").read_text()
    for name, tool in golden["tools"].items():
        assert f"\n## {name}\n" in page
        for parameter in tool["inputSchema"].get("properties", {}):
            assert f"| `{parameter}` |" in page


def test_a_writing_tool_without_side_effects_and_retention_stops_the_generator() -> None:
    gen = _generator()
    golden = copy.deepcopy(json.loads(gen.GOLDEN.read_text()))
    tool = copy.deepcopy(golden["tools"]["knowledge_propose"])
    golden["tools"]["knowledge_new_writer"] = tool
    with pytest.raises(SystemExit, match="knowledge_new_writer"):
        gen.render(golden)
