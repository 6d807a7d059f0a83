"""Write approval per runtime and save mode, and the gateway annotations it relies on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import PurePosixPath

import pytest
from guide_seed import section, table_rows

from vera.integrations.artifacts import (
    HOOK_TIMEOUT_S,
    PER_CALL_TOOLS,
    PROPOSAL_TOOLS,
    READ_TOOLS,
    RUNTIMES,
    WRITE_TOOLS,
    Artifact,
    render,
)
from vera.integrations.contract import SAVE_MODES, apply_overrides, load_contract

API = "http://127.0.0.1:8000"
OTHER_WRITES = tuple(tool for tool in WRITE_TOOLS if tool not in PROPOSAL_TOOLS)


def artifacts(runtime: str, mode: str) -> dict[str, Artifact]:
    contract = apply_overrides(load_contract(), {"defaults.save_mode": mode})[0]
    return {a.path: a for a in render(runtime, contract, api_url=API)}


def annotations() -> dict[str, object]:
    from vera.gateway.profiles import tools_for_profile

    return {spec.name: spec.definition().annotations for spec in tools_for_profile("compatibility")}


def test_write_tools_are_exactly_the_tools_not_advertised_read_only() -> None:
    writes = {name for name, hints in annotations().items() if hints.read_only_hint is not True}
    assert writes == set(WRITE_TOOLS)


def test_read_tools_are_exactly_the_coding_tools_advertised_read_only() -> None:
    from vera.gateway.profiles import tools_for_profile

    coding = {spec.name: spec.definition().annotations for spec in tools_for_profile("coding")}
    assert {name for name, hints in coding.items() if hints.read_only_hint is True} \
        == set(READ_TOOLS)


def test_gateway_annotations_match_the_guides_table() -> None:
    rows = table_rows(section("Tool Annotations", "Input Bounds"), "Tool group")
    expected = {}
    for group, read_only, idempotent, destructive, open_world in rows:
        for name in group.split(", "):
            expected[name] = (read_only, idempotent, destructive, open_world)
    default = expected.pop("all read tools")
    for name, hints in annotations().items():
        actual = tuple(
            str(v).lower()
            for v in (
                hints.read_only_hint,
                hints.idempotent_hint,
                hints.destructive_hint,
                hints.open_world_hint,
            )
        )
        assert actual == expected.get(name, default), name


def claude_permissions(mode: str) -> dict[str, set[str]]:
    settings = artifacts("claude-code", mode)[".claude/settings.json"].content
    return {decision: set(tools) for decision, tools in settings["permissions"].items()}


@pytest.mark.parametrize(
    ("mode", "proposal"), [("off", "deny"), ("suggest", "ask"), ("auto-propose", "allow")]
)
def test_claude_code_permission_rules_follow_the_save_mode(mode: str, proposal: str) -> None:
    rules = claude_permissions(mode)
    reads = {f"mcp__vera__{t}" for t in READ_TOOLS}
    per_tool = {f"mcp__vera__{t}" for t in OTHER_WRITES if t not in PER_CALL_TOOLS}
    assert rules[proposal] == {f"mcp__vera__{t}" for t in PROPOSAL_TOOLS} | (
        per_tool if proposal == "ask" else reads if proposal == "allow" else set()
    )
    assert per_tool <= rules["ask"] and reads <= rules["allow"]
    listed = set().union(*rules.values())
    # knowledge_get_context is decided per call by the PreToolUse hook, never by a rule.
    assert listed == reads | {f"mcp__vera__{t}" for t in WRITE_TOOLS if t not in PER_CALL_TOOLS}


@pytest.mark.parametrize(("tool_input", "decision"), [
    ({}, "allow"), ({"persist": False, "query": "q"}, "allow"), ({"persist": True}, "ask"),
    ({"persist": "yes"}, "ask")])
def test_claude_code_decides_get_context_per_call(tool_input, decision, tmp_path) -> None:
    rendered = artifacts("claude-code", "suggest")
    hook = rendered[".claude/settings.json"].content["hooks"]["PreToolUse"][0]
    assert hook["matcher"] == "mcp__vera__knowledge_get_context"
    script = tmp_path / "vera_hook.py"
    script.write_text(rendered[".claude/hooks/vera_hook.py"].content)
    event = json.dumps({"tool_name": hook["matcher"], "tool_input": tool_input})
    done = subprocess.run([sys.executable, str(script), "pre-tool-use"], input=event,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    output = json.loads(done.stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == decision


@pytest.mark.parametrize("mode", SAVE_MODES)
def test_codex_prompts_for_every_non_read_only_tool(mode: str) -> None:
    server = artifacts("codex", mode)[".codex/config.toml"].content["mcp_servers"]["vera"]
    assert server["default_tools_approval_mode"] == "writes"
    assert server.get("disabled_tools", []) == (list(PROPOSAL_TOOLS) if mode == "off" else [])
    # knowledge_get_context gets no rule: the server lists it read-only for Codex's
    # credential, which cannot persist (ADR 0019), so `writes` asks nothing for it.
    approved = set(server.get("tools", {}))
    assert approved == (set(PROPOSAL_TOOLS) if mode == "auto-propose" else set())
    assert "required" not in server  # fail open: a down VERA never stops Codex


@pytest.mark.parametrize(
    ("mode", "proposal"), [("off", "deny"), ("suggest", "ask"), ("auto-propose", "allow")]
)
def test_opencode_permission_rules_name_each_write_tool_exactly(mode: str, proposal: str) -> None:
    permission = dict(artifacts("opencode", mode)["opencode.json"].content["permission"])
    assert permission.pop("skill") == {"vera": "deny"}  # the other runtimes' skill
    # OpenCode's credential cannot persist (ADR 0019), so the server refuses
    # knowledge_get_context(persist=true) and the tool runs without a prompt.
    assert permission == {
        f"vera_{t}": proposal if t in PROPOSAL_TOOLS else "allow" if t in PER_CALL_TOOLS
        else "ask" for t in WRITE_TOOLS
    }


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_artifacts_stay_in_the_project_and_leave_the_system_prompt_alone(runtime: str) -> None:
    for path, artifact in artifacts(runtime, "suggest").items():
        pure = PurePosixPath(path)
        assert not pure.is_absolute() and ".." not in pure.parts and "\\" not in path
        assert pure.name not in ("CLAUDE.md", "AGENTS.md")
        if artifact.kind != "file":
            flat = json.dumps(artifact.content)
            for key in (
                "systemPrompt",
                "appendSystemPrompt",
                "instructions",
                "developer_instructions",
            ):
                assert key not in flat


def session_start_handlers(runtime: str) -> list[dict]:
    files = artifacts(runtime, "suggest")
    name = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json"}[runtime]
    groups = files[name].content["hooks"]["SessionStart"]
    return [handler for group in groups for handler in group["hooks"]]


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_hooks_have_a_short_bounded_timeout(runtime: str) -> None:
    handlers = session_start_handlers(runtime)
    assert handlers and all(
        h["type"] == "command" and h["timeout"] == HOOK_TIMEOUT_S for h in handlers
    )
    assert HOOK_TIMEOUT_S <= 10  # the runtimes default to 600 s
    assert all("session-start" in h["command"] and "/mcp" not in h["command"] for h in handlers)


def test_codex_config_merge_is_valid_toml() -> None:
    import tomlkit

    content = artifacts("codex", "auto-propose")[".codex/config.toml"].content
    assert tomllib.loads(tomlkit.dumps(content)) == content


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_hook_and_plugin_sources_parse(runtime: str) -> None:
    for path, artifact in artifacts(runtime, "suggest").items():
        if path.endswith(".py"):
            compile(artifact.content, path, "exec")
        if path.endswith(".js"):
            node = shutil.which("node")
            # scripts/runtimes (run by scripts/test) needs Node.js: a missing one fails here.
            assert node is not None, "node is not installed (scripts/runtimes needs Node.js)"
            done = subprocess.run(
                [node, "--input-type=module", "--check"],
                input=artifact.content,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
