"""A developer on a team connects their agent to the team's authenticated VERA with
`vera connect` alone: the token it stores fits the save mode, and the server (not only the
client) holds the mode's line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
import test_runtime_handshake as handshake
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.integrations.ownership import TOKEN_PATH

# Appended, not prepended: `conftest` must stay the e2e one for the modules beside this.
sys.path.append(str(Path(__file__).resolve().parents[1] / "integrations"))
import test_hooks_runtime_sessions as sessions
from runtime_fakes import FakeAnthropic, FakeChat, FakeResponses

pytestmark = pytest.mark.e2e
runtime_bin = handshake.runtime_bin
opencode_home, opencode_plugin_sdk = sessions.opencode_home, sessions.opencode_plugin_sdk
project, run_vera = handshake.project, handshake.run_vera


def register(stack) -> str:
    api_url = f"http://127.0.0.1:{stack.env['VERA_API__PORT']}"
    return httpx.post(f"{api_url}/identity/register",
                      json={"display_name": "dev"}).json()["api_key"]


def connect(stack, repo: Path, env: dict[str, str], api_key: str, runtime: str,
            mode: str) -> str:
    """`vera connect` with the API key piped in; the token it stored, read back from the
    user's untracked file."""
    api_url = f"http://127.0.0.1:{stack.env['VERA_API__PORT']}"
    done = run_vera(repo, env, "connect", runtime, "--api-url", api_url, "--mcp-url",
                    stack.mcp_url, "--save-mode", mode, "--yes", "--api-key-stdin",
                    stdin=api_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    return (repo / TOKEN_PATH).read_text()


def client(stack, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


async def granted(session: Client) -> set[str]:
    boot = await session.call_tool("knowledge_bootstrap", {})
    assert not boot.is_error, boot.content
    return {c["class"] for c in boot.structured_content["capabilities"] if c["granted"]}


PROPOSAL = {"subject": "payments-api", "predicate": "deploys_to",
            "object": "the eu-west-1 cluster via Argo CD", "evidence_text": "runbook §2",
            "task_ref": "task-7", "runtime": "opencode"}


async def test_each_save_modes_token_fits_it_and_the_server_holds_off(
        auth_stack, runtime_bin, tmp_path) -> None:
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_key = register(auth_stack)
    suggest = connect(auth_stack, repo, env, api_key, "opencode", "suggest")
    async with client(auth_stack, suggest) as session:
        assert await granted(session) == {"READ", "PROPOSE", "FEEDBACK", "SNAPSHOT"}
        created = await session.call_tool("knowledge_propose", PROPOSAL)
        assert not created.is_error, created.content

    off = connect(auth_stack, repo, env, api_key, "opencode", "off")
    async with client(auth_stack, off) as session:
        assert await granted(session) == {"READ", "FEEDBACK", "SNAPSHOT"}
        with pytest.raises(MCPError) as refused:
            await session.call_tool("knowledge_propose", {**PROPOSAL, "task_ref": "task-8"})
        assert refused.value.data == {"code": "unauthorized", "required_scope": "memory:propose"}
        persisted = await session.call_tool("knowledge_get_context", {
            "query": "how is payments-api deployed?", "persist": True})
        assert not persisted.is_error, persisted.content
        pack = persisted.structured_content
        assert pack["persisted"] is True and pack["pack_id"]
        feedback = await session.call_tool("knowledge_feedback", {
            "context_pack_id": pack["pack_id"], "result_ref": pack["results"][0]["result_ref"],
            "signal": "up"})
        assert not feedback.is_error, feedback.content
        assert feedback.structured_content["created"] is True


FACT = {"subject": "payments-api", "predicate": "deploys_to",
        "object": "the eu-west-1 cluster via Argo CD", "evidence_text": "runbook §2",
        "task_ref": "task-7", "runtime": "opencode"}
SESSION_TASK = "task-session"


def grounded_then_propose(results: list[str]) -> tuple[str, dict] | None:
    """The scripted model: ground the task, propose what it learned, ask what became of it."""
    steps = [
        ("knowledge_get_context", {"query": "how is payments-api deployed?"}),
        ("knowledge_propose", {"subject": "payments-api", "predicate": "retry_policy",
                               "object": "three times with backoff",
                               "evidence_text": "handler.py", "task_ref": SESSION_TASK,
                               "runtime": "claude-code"}),
        ("knowledge_proposal_report", {"task_ref": SESSION_TASK}),
    ]
    return steps[len(results)] if len(results) < len(steps) else None


def tool_results(bodies: list[dict]) -> list[str]:
    last = bodies[-1] if bodies else {}
    return [json.dumps(block.get("content")) for m in last.get("messages", [])
            if isinstance(m.get("content"), list) for block in m["content"]
            if block.get("type") == "tool_result"]


async def test_claude_code_headless_against_the_authenticated_gateway(
        auth_stack, runtime_bin, tmp_path) -> None:
    """From a shell with nothing exported: `claude -p` reaches the real gateway with the
    token `vera connect` stored, retrieval runs without a click, the proposal in suggest
    mode is not written, and the server's proposal report agrees."""
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_key = register(auth_stack)
    # The team's knowledge this developer can read (a personal proposal until shared
    # projects land; VERA is not faked either way).
    seed = connect(auth_stack, repo, env, api_key, "opencode", "suggest")
    async with client(auth_stack, seed) as session:
        assert not (await session.call_tool("knowledge_propose", FACT)).is_error
    connect(auth_stack, repo, env, api_key, "claude-code", "suggest")
    handshake.approve_claude_server(repo, env)  # the one-time trust a person gives
    model = FakeAnthropic(plan=grounded_then_propose)
    try:
        clean = {"PATH": f"{runtime_bin}:/usr/bin:/bin", "HOME": env["HOME"],
                 "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-fake",
                 "ENABLE_TOOL_SEARCH": "false", "DISABLE_AUTOUPDATER": "1",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1"}
        done = await anyio.to_thread.run_sync(lambda: subprocess.run(
            ["claude", "-p", "how do we deploy payments-api?", "--output-format", "json"],
            cwd=repo, env=clean, capture_output=True, text=True, timeout=240,
            stdin=subprocess.DEVNULL))
    finally:
        model.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = tool_results(model.bodies)
    assert len(results) == 3, (results, done.stdout[-2000:])
    assert FACT["object"] in results[0]  # answered by the real server, citing the fact
    outcome = json.loads(done.stdout)
    denied = [d["tool_name"] for d in outcome.get("permission_denials", [])]
    assert denied == ["mcp__vera__knowledge_propose"]  # only the write asked a click
    async with client(auth_stack, seed) as session:
        report = await session.call_tool("knowledge_proposal_report", {"task_ref": SESSION_TASK})
    assert not report.is_error, report.content
    assert report.structured_content["counts"]["created"] == 0
    seen = json.loads(json.loads(results[2]))  # the report as the model read it
    assert seen["counts"] == report.structured_content["counts"]


def searched_then_propose(results: list[str]) -> tuple[str, dict] | None:
    """Codex asks for knowledge_get_context per tool (the GUIDE), so its headless model
    grounds the task with the read-only search instead."""
    if not results:
        return "knowledge_search", {"query": "how is payments-api deployed?"}
    return grounded_then_propose(results)


async def test_codex_headless_against_the_authenticated_gateway(
        auth_stack, runtime_bin, tmp_path) -> None:
    """`codex exec` from a shell whose only VERA setting is the profile line connect
    printed: search answered by the real server, the suggest-mode proposal not written,
    the proposal report agrees."""
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_key = register(auth_stack)
    seed = connect(auth_stack, repo, env, api_key, "opencode", "suggest")
    async with client(auth_stack, seed) as session:
        assert not (await session.call_tool("knowledge_propose", FACT)).is_error
    api_url = f"http://127.0.0.1:{auth_stack.env['VERA_API__PORT']}"
    done = run_vera(repo, env, "connect", "codex", "--api-url", api_url, "--mcp-url",
                    auth_stack.mcp_url, "--yes", "--api-key-stdin", stdin=api_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    profile = next(ln.strip() for ln in done.stdout.splitlines() if ln.strip().startswith(
        "export VERA_MCP_TOKEN="))
    model = FakeResponses(plan=searched_then_propose)
    codex_home = Path(env["CODEX_HOME"])
    (codex_home / "config.toml").write_text(
        f'model = "fake-model"\nmodel_provider = "fake"\n[model_providers.fake]\n'
        f'name = "fake"\nbase_url = "{model.url}/v1"\nwire_api = "responses"\n'
        f'env_key = "FAKE_API_KEY"\n[projects."{repo}"]\ntrust_level = "trusted"\n')
    clean = {"PATH": f"{runtime_bin}:/usr/bin:/bin", "HOME": env["HOME"],
             "CODEX_HOME": str(codex_home), "FAKE_API_KEY": "x"}
    try:
        # Hook hash trust is a user-home review step; this one invocation bypasses it.
        ran = await anyio.to_thread.run_sync(lambda: subprocess.run(
            ["bash", "-c", f"{profile}\nexec codex exec --skip-git-repo-check "
             "--dangerously-bypass-hook-trust 'how do we deploy payments-api?'"],
            cwd=repo, env=clean, capture_output=True, text=True, timeout=240,
            stdin=subprocess.DEVNULL))
    finally:
        model.close()
    assert ran.returncode == 0, ran.stderr[-2000:]
    outputs = [str(item.get("output")) for body in model.bodies[-1:]
               for item in body.get("input", [])
               if isinstance(item, dict) and item.get("type", "").endswith("call_output")]
    assert len(outputs) == 3, (outputs, ran.stderr[-2000:])
    assert FACT["object"] in outputs[0]  # answered by the real server
    async with client(auth_stack, seed) as session:
        report = await session.call_tool("knowledge_proposal_report", {"task_ref": SESSION_TASK})
    assert report.structured_content["counts"]["created"] == 0
    seen = json.loads(outputs[2][outputs[2].index("{"):])  # after Codex's own preamble
    assert seen["counts"] == report.structured_content["counts"]  # the model agrees


async def test_opencode_headless_against_the_authenticated_gateway(
        auth_stack, runtime_bin, tmp_path, opencode_home, opencode_plugin_sdk) -> None:
    """`opencode run` from a shell with nothing exported, reading the token through its own
    `{file:}` substitution: search answered by the real server, the suggest-mode proposal
    refused by the `ask` rule (headless OpenCode ends the run there) and not written, as the
    server's proposal report shows."""
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_key = register(auth_stack)
    seed = connect(auth_stack, repo, env, api_key, "opencode", "suggest")
    async with client(auth_stack, seed) as session:
        assert not (await session.call_tool("knowledge_propose", FACT)).is_error
    model = FakeChat(plan=searched_then_propose)
    config = json.loads((repo / "opencode.json").read_text())
    config.update({"model": "fake/m", "provider": {"fake": {
        "npm": "@ai-sdk/openai-compatible", "name": "Fake",
        "options": {"baseURL": model.url + "/v1", "apiKey": "x"},
        "models": {"m": {"name": "m", "tool_call": True}}}}})
    (repo / "opencode.json").write_text(json.dumps(config, indent=2))
    for name in sessions.OPENCODE_OWNED:  # OpenCode's own plugin SDK, not VERA's
        source = opencode_plugin_sdk / name
        if source.is_dir():
            (repo / ".opencode" / name).symlink_to(source, target_is_directory=True)
        elif source.exists():
            shutil.copy2(source, repo / ".opencode" / name)
    clean = {**sessions.opencode_env(opencode_home), "PATH": f"{runtime_bin}:/usr/bin:/bin"}
    try:
        ran = await anyio.to_thread.run_sync(lambda: subprocess.run(
            ["opencode", "run", "how do we deploy payments-api?"], cwd=repo, env=clean,
            capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL))
    finally:
        model.close()
    assert ran.returncode == 0, ran.stderr[-2000:]
    outputs = [str(m.get("content")) for body in model.bodies[-1:]
               for m in body.get("messages", []) if m.get("role") == "tool"]
    assert len(outputs) == 1, (outputs, ran.stderr[-2000:])
    assert FACT["object"] in outputs[0]  # answered by the real server
    asked = [c["function"]["name"] for body in model.bodies for m in body.get("messages", [])
             if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
    assert "vera_knowledge_search" in asked
    async with client(auth_stack, seed) as session:
        report = await session.call_tool("knowledge_proposal_report", {"task_ref": SESSION_TASK})
    assert report.structured_content["counts"] == {
        "conflicted": 0, "created": 0, "deduplicated": 0, "rejected": 0, "skipped": 0}
