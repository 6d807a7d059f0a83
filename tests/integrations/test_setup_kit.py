"""The setup kit under examples/ says what `vera connect` writes (issue 42 item 7): each
runtime's SPEC lists exactly the files connect writes, and names every key and every
credential reference connect puts in them, in every save mode."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from vera.integrations.artifacts import PROPOSAL_TOOLS, READ_TOOLS, WRITE_TOOLS
from vera.integrations.connect import render_setup
from vera.integrations.contract import SAVE_MODES, apply_overrides, load_contract

KIT = Path(__file__).resolve().parents[2] / "examples/integrations/vera-project-setup/runtimes"
TOOLS = (*WRITE_TOOLS, *READ_TOOLS, *PROPOSAL_TOOLS)


def _renderings(root: Path, runtime: str):
    for mode in SAVE_MODES:
        contract, _ = apply_overrides(load_contract(), {"defaults.save_mode": mode})
        for authenticated in (False, True):
            yield render_setup(root, runtime, contract, api_url="https://vera.example.org",
                               mcp_url="https://vera.example.org/mcp",
                               authenticated=authenticated)


def _keys(value: Any) -> set[str]:
    """Every mapping key, except the per-tool rule names (the SPEC says `<write tool>`)."""
    if isinstance(value, dict):
        own = {k for k in value if not any(tool in k for tool in TOOLS)}
        return own.union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


def _table_files(spec: str) -> set[str]:
    rows = re.findall(r"^\| (.+?) \|", spec, flags=re.M)
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row)}


@pytest.mark.parametrize("runtime", ["claude-code", "codex", "opencode"])
def test_each_spec_matches_what_connect_writes(runtime: str, tmp_path: Path) -> None:
    spec = (KIT / runtime / "SPEC.md").read_text()
    written: set[str] = set()
    keys: set[str] = set()
    references: set[str] = set()
    for rendering in _renderings(tmp_path, runtime):
        written |= {a.path for a in rendering.files} | set(rendering.merges)
        for _, mapping in rendering.merges.values():
            keys |= _keys(mapping)
        # The credential wiring, word for word: the helper command, the file reference,
        # the variable's name.
        references |= {v for k, v in rendering.server.items()
                       if isinstance(v, str) and k not in ("url", "type")}
        references |= set(rendering.server.get("headers", {}).values())
    assert _table_files(spec) - {"opencode.jsonc"} == written
    assert sorted(k for k in keys if k not in spec) == []
    assert sorted(r for r in references if r not in spec) == []
