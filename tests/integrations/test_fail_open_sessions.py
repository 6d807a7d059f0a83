"""Fail-open with real sessions (issue 42 item 5): each runtime CLI, connected with
``vera connect``, runs a headless session whose scripted model calls ``knowledge_search``
and then answers, while VERA is down, slow past its budget, or rate-limited. The session
ends on its own (a subprocess timeout far above a normal run is the "hanging" bound), the
model's final turn happens after it was shown a short error, and ``vera doctor`` names the
state by its stable reason.

VERA here is the loopback stand-in of ``runtime_fakes`` answering what the gateway answers
in each state (``FakeVera.fault``); "down" is a closed port.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import runtime_cli as cli
import tomlkit
from runtime_fakes import FakeAnthropic, FakeChat, FakeResponses, FakeVera
from test_hooks_runtime_sessions import (  # the sessions' own runners, shared
    TAG,
    configure_opencode,
    opencode_env,
    opencode_home,  # noqa: F401  (a fixture opencode_plugin_sdk needs)
    opencode_plugin_sdk,  # noqa: F401  (a fixture)
    run_claude,
    run_codex,
    runtime_cli,
)

from vera.gateway.errors import ERROR_CODES
from vera.integrations import doctor
from vera.integrations.runtimes import codex

STATES = ("down", "slow", "quota")
# What `vera doctor` names in each state (the finding "vera tools visible").
DOCTOR_REASON = {"down": "unreachable", "slow": "timed_out", "quota": "quota_exceeded"}
# A tool error longer than this, or carrying a traceback, is not a bounded error.
BOUNDED_CHARS = 600


def search_then_answer(results: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The scripted model: one VERA read, then its final answer whatever the read gave."""
    return ("knowledge_search", {"query": "deployment conventions"}) if not results else None


@pytest.fixture
def endpoint() -> Iterator[FakeVera]:
    server = FakeVera()
    yield server
    server.close()


def connect(vera: Callable[..., subprocess.CompletedProcess], endpoint: FakeVera,
            runtime: str) -> None:
    done = vera("connect", runtime, "--api-url", endpoint.url, "--mcp-url", endpoint.mcp_url,
                "--yes")
    assert done.returncode == 0, done.stderr


def enter(state: str, endpoint: FakeVera) -> None:
    if state == "down":
        endpoint.close()  # the port now refuses connections
    else:
        endpoint.fault = state


def doctor_tools_line(vera: Callable[..., subprocess.CompletedProcess], runtime_bin: Path,
                      home_env: dict[str, str], runtime: str, state: str,
                      endpoint: FakeVera) -> str:
    """Doctor's finding on VERA's tools in ``state``. Slow and rate-limited reach discovery
    too here (a hung gateway; a spent discovery bucket): a tool-call bucket alone leaves
    tools/list working, which doctor then truthfully reports."""
    if state != "down":
        endpoint.fault = {"slow": "stalled", "quota": "quota-all"}[state]
    report = vera("doctor", runtime, env={"PATH": f"{runtime_bin}:{home_env['PATH']}"})
    assert report.returncode == 1, report.stdout
    return next(line for line in report.stdout.splitlines() if "vera tools visible" in line)


# The error VERA answers in each state (a tool call past its budget, a spent bucket).
SLUG = {"slow": "internal_error", "quota": "quota_exceeded"}


def assert_bounded(error: str, state: str, shows: str) -> None:
    """The model saw a short error, no traceback, carrying what this runtime passes on of
    the gateway's JSON-RPC error: ``message`` (Claude Code), ``code`` (the integer too:
    OpenCode) or ``data`` (``data.code`` as well: Codex)."""
    assert error and len(error) < BOUNDED_CHARS, error
    assert "Traceback" not in error and 'File "' not in error, error
    code, message = ERROR_CODES[SLUG[state]]
    assert message in error, error
    assert (str(code) in error) is (shows in ("code", "data")), error
    assert (f'\\"code\\":\\"{SLUG[state]}\\"' in error) is (shows == "data"), error


def assert_down_session(offered: set[str], hook_lines: list[str]) -> None:
    """Down: the runtime drops the server at start; the model works without VERA's tools,
    and the session-start line says VERA is degraded."""
    assert not any("knowledge_search" in name for name in offered), offered
    assert hook_lines and all("vera=degraded" in line for line in hook_lines), hook_lines


# ---- Claude Code ---------------------------------------------------------------------------

def claude_tool_results(model: FakeAnthropic) -> list[str]:
    return [
        json.dumps(block.get("content"))
        for body in model.bodies
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("state", STATES)
def test_claude_code_session_fails_open(tmp_path: Path, repo: Path, vera, runtime_bin: Path,
                                        home_env: dict[str, str], endpoint: FakeVera,
                                        state: str) -> None:
    connect(vera, endpoint, "claude-code")
    cli.approve_claude_server(repo, home_env)
    enter(state, endpoint)
    model = FakeAnthropic(search_then_answer)
    try:
        done = run_claude(repo, Path(home_env["HOME"]), model)  # timeout=90: the bound
    finally:
        model.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout).get("result") == "DONE"
    offered = {t.get("name", "") for b in model.bodies for t in b.get("tools", [])}
    if state == "down":
        hook = [t for b in model.bodies for t in _texts(b) if TAG in t]
        assert_down_session(offered, hook)
    else:
        assert endpoint.calls == ["knowledge_search"]
        errors = claude_tool_results(model)
        assert len(errors) == 1
        assert_bounded(errors[0], state, "message")
    line = doctor_tools_line(vera, runtime_bin, home_env, "claude-code", state, endpoint)
    assert f"cannot list tools: {DOCTOR_REASON[state]}:" in line, line


def _texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages", []):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts.extend(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
    return texts


# ---- Codex ---------------------------------------------------------------------------------

def codex_tool_outputs(model: FakeResponses) -> list[str]:
    return [
        json.dumps(item.get("output"))
        for body in model.bodies
        for item in body.get("input", [])
        if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("state", STATES)
def test_codex_session_fails_open(tmp_path: Path, repo: Path, vera, runtime_bin: Path,
                                  home_env: dict[str, str], endpoint: FakeVera,
                                  state: str) -> None:
    connect(vera, endpoint, "codex")
    enter(state, endpoint)
    model = FakeResponses(search_then_answer)
    try:
        done = run_codex(repo, tmp_path, model)  # timeout=120: the bound
    finally:
        model.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DONE" in done.stdout
    offered = {
        tool.get("name", "")
        for body in model.bodies
        for namespace in body.get("tools", [])
        if namespace.get("name") == "mcp__vera"
        for tool in namespace.get("tools", [])
    }
    if state == "down":
        hook = [t for t in _developer_texts(model) if TAG in t]
        assert_down_session(offered, hook)
    else:
        assert endpoint.calls == ["knowledge_search"]
        outputs = codex_tool_outputs(model)
        assert len(outputs) == 1
        assert_bounded(outputs[0], state, "data")
    line = doctor_tools_line(vera, runtime_bin, home_env, "codex", state, endpoint)
    assert f"cannot list tools: {DOCTOR_REASON[state]}:" in line, line


@pytest.mark.slow
def test_a_codex_session_ends_a_tool_call_vera_never_answers(
    tmp_path: Path, repo: Path, vera, endpoint: FakeVera
) -> None:
    """VERA accepts the call and hangs: Codex, which waits for ever unless told, ends the
    call after the ``tool_timeout_sec`` connect wrote, and the model goes on."""
    connect(vera, endpoint, "codex")
    server = tomlkit.parse((repo / ".codex/config.toml").read_text()).unwrap()
    assert server["mcp_servers"]["vera"]["tool_timeout_sec"] == codex.TOOL_TIMEOUT_SECONDS
    endpoint.fault = "hung-call"
    model = FakeResponses(search_then_answer)
    try:
        done = run_codex(repo, tmp_path, model)  # timeout=120: the bound, above the 45 s
    finally:
        model.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DONE" in done.stdout
    assert endpoint.calls == ["knowledge_search"]
    [output] = codex_tool_outputs(model)
    assert "timed out" in output and len(output) < BOUNDED_CHARS, output


def offered_vera_tools(body: dict[str, Any]) -> set[str]:
    """The VERA tools one request to the model offered."""
    return {tool.get("name", "") for namespace in body.get("tools", [])
            if namespace.get("name") == "mcp__vera" for tool in namespace.get("tools", [])}


@pytest.mark.slow
def test_a_codex_session_waits_for_a_vera_slow_to_start(
    tmp_path: Path, repo: Path, vera, endpoint: FakeVera
) -> None:
    """VERA answers ``initialize`` after 3 s (a cold headers helper on a loaded machine
    costs as much): Codex gives a server still starting 1 s by default before the first
    turn goes without its tools, so connect sets the wait above it, and the first turn
    offers VERA's tools and the model's call reaches VERA."""
    connect(vera, endpoint, "codex")
    config = tomlkit.parse((repo / ".codex/config.toml").read_text()).unwrap()
    assert config["mcp_optional_startup_grace_ms"] == codex.STARTUP_GRACE_MS
    endpoint.fault, endpoint.stall_s = "slow-start", 3.0
    model = FakeResponses(search_then_answer)
    try:
        done = run_codex(repo, tmp_path, model)
    finally:
        model.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "knowledge_search" in offered_vera_tools(model.bodies[0]), model.bodies[0]
    assert endpoint.calls == ["knowledge_search"]
    assert "DONE" in done.stdout


def _developer_texts(model: FakeResponses) -> list[str]:
    return [
        str(part.get("text", ""))
        for body in model.bodies
        for item in body.get("input", [])
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content", [])
        if isinstance(part, dict)
    ]


# ---- OpenCode ------------------------------------------------------------------------------

def opencode_tool_messages(model: FakeChat) -> list[str]:
    return [
        json.dumps(message.get("content"))
        for body in model.bodies
        for message in body.get("messages", [])
        if message.get("role") == "tool"
    ]


def run_opencode(root: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(runtime_cli("opencode")), "run", "check our deployment conventions"],
        cwd=root, env=opencode_env(home), capture_output=True, text=True,
        timeout=180,  # the bound
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.parametrize("state", STATES)
def test_opencode_session_fails_open(tmp_path: Path, repo: Path, vera, runtime_bin: Path,
                                     home_env: dict[str, str], endpoint: FakeVera,
                                     opencode_home: Path,  # noqa: F811
                                     opencode_plugin_sdk: Path,  # noqa: F811  (warmed up)
                                     state: str) -> None:
    connect(vera, endpoint, "opencode")
    model = FakeChat(search_then_answer)
    try:
        configure_opencode(repo, endpoint, model)
        enter(state, endpoint)
        # OpenCode now and then starts without its MCP server on a loaded machine (see
        # test_hooks_runtime_sessions.opencode_session): retried while VERA is up.
        for _ in range(1 if state == "down" else 3):
            model.bodies.clear()
            endpoint.calls.clear()
            done = run_opencode(repo, opencode_home)
            assert done.returncode == 0, done.stderr[-2000:]
            offered = {t["function"]["name"] for b in model.bodies for t in b.get("tools", [])}
            if "vera_knowledge_search" in offered:
                break
    finally:
        model.close()
    assert "DONE" in done.stdout
    if state == "down":
        hook = [json.dumps(m.get("content")) for b in model.bodies
                for m in b.get("messages", []) if m.get("role") == "user"]
        assert_down_session(offered, [t for t in hook if TAG in t])
    else:
        assert endpoint.calls == ["knowledge_search"]
        messages = opencode_tool_messages(model)
        assert len(messages) == 1
        assert_bounded(messages[0], state, "code")
    line = doctor_tools_line(vera, runtime_bin, home_env, "opencode", state, endpoint)
    assert f"cannot list tools: {DOCTOR_REASON[state]}:" in line, line


# ---- doctor's reasons, without a runtime -----------------------------------------------------

@pytest.mark.parametrize("state", STATES)
def test_doctor_names_each_failure_state(endpoint: FakeVera, state: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "TOOLS_TIMEOUT_SECONDS", 2.0)
    if state == "down":
        endpoint.close()
    else:
        endpoint.fault = {"slow": "stalled", "quota": "quota-all"}[state]
    finding = doctor._tools_finding(endpoint.mcp_url, None)
    assert not finding.ok
    assert finding.detail.startswith(f"cannot list tools: {DOCTOR_REASON[state]}:"), finding


def test_doctor_reports_tools_while_only_tool_calls_are_rate_limited(
        endpoint: FakeVera) -> None:
    """A spent tool-call bucket leaves discovery served: doctor lists the tools and says so."""
    endpoint.fault = "quota"
    finding = doctor._tools_finding(endpoint.mcp_url, None)
    assert finding.ok and finding.detail == "4 tools"
