"""A developer on a team connects their agent to the team's authenticated VERA with
`vera connect` alone: the token it stores fits the save mode, the server (not only the
client) holds the mode's line, and each real runtime, headless in a clone of the team's
repository, is grounded in the fact the team's curator ingested into the shared project.
Then the loop's second half with each runtime: in auto-propose its session proposes through
the real gateway, the curator verifies the proposal in the console (Chromium), and a new
session's model reads the verified fact, cited and marked verified."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest
import test_runtime_handshake as handshake
from harness import without_ids
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from team import (
    PROJECT,
    REPOSITORY,
    SEED_OBJECT,
    SEED_SOURCE,
    bearer,
    ingested_fact_cited,
    shared_project,
)

from vera.gateway.errors import ERROR_CODES
from vera.integrations.ownership import credential_files
from vera.repository_identity import canonicalize

# Appended, not prepended: `conftest` must stay the e2e one for the modules beside this.
sys.path.append(str(Path(__file__).resolve().parents[1] / "integrations"))
import test_hooks_runtime_sessions as sessions
from runtime_fakes import FakeAnthropic, FakeChat, FakeResponses, Plan

pytestmark = pytest.mark.e2e
runtime_bin = handshake.runtime_bin
opencode_home, opencode_plugin_sdk = sessions.opencode_home, sessions.opencode_plugin_sdk
project, run_vera = handshake.project, handshake.run_vera


def shell_path(runtime_bin: Path) -> str:
    """A developer's PATH: the installed `vera` (the runtimes run `vera mcp-token` for
    their token) and the runtime CLIs, nothing else."""
    return f"{Path(sys.executable).parent}:{runtime_bin}:/usr/bin:/bin"


def api_url(stack) -> str:
    return f"http://127.0.0.1:{stack.env['VERA_API__PORT']}"


def register(stack) -> str:
    return httpx.post(f"{api_url(stack)}/identity/register",
                      json={"display_name": "dev"}).json()["api_key"]


def connect(stack, repo: Path, env: dict[str, str], api_key: str, runtime: str,
            mode: str) -> str:
    """`vera connect` with the API key piped in; the token it stored, read back from the
    user's untracked file."""
    done = run_vera(repo, env, "connect", runtime, "--api-url", api_url(stack), "--mcp-url",
                    stack.mcp_url, "--save-mode", mode, "--yes", "--api-key-stdin",
                    stdin=api_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    return (repo / credential_files(runtime).token).read_text()


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
        # OpenCode approves per tool, so its credential never persists (ADR 0019).
        assert await granted(session) == {"READ", "PROPOSE", "FEEDBACK"}
        created = await session.call_tool("knowledge_propose", PROPOSAL)
        assert not created.is_error, created.content
    claude = connect(auth_stack, repo, env, api_key, "claude-code", "suggest")
    async with client(auth_stack, claude) as session:
        assert await granted(session) == {"READ", "PROPOSE", "FEEDBACK", "SNAPSHOT"}

    off = connect(auth_stack, repo, env, api_key, "opencode", "off")
    async with client(auth_stack, off) as session:
        assert await granted(session) == {"READ"}
        grounded = await session.call_tool("knowledge_get_context", {
            "query": "how is payments-api deployed?"})
        assert not grounded.is_error, grounded.content
        # Whatever the runtime or its permission mode decides, the server refuses each write.
        writes = [
            ("knowledge_propose", {**PROPOSAL, "task_ref": "task-8"}, "memory:propose"),
            ("knowledge_get_context", {"query": "how is payments-api deployed?",
                                       "persist": True}, "memory:snapshot"),
            ("knowledge_feedback", {"context_pack_id": "pack-1", "result_ref": "r1",
                                    "signal": "up"}, "memory:feedback"),
        ]
        for tool, arguments, scope in writes:
            with pytest.raises(MCPError) as refused:
                await session.call_tool(tool, arguments)
            assert without_ids(refused.value.data) == {"code": "unauthorized",
                                                    "required_scope": scope}


def mcp_token(repo: Path, env: dict[str, str], runtime: str) -> str:
    done = run_vera(repo, env, "mcp-token", "--runtime", runtime)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def live_connection_keys(stack, api_key: str) -> list[str]:
    """The runtimes whose per-connection key (labelled by connect) still stands."""
    keys = httpx.get(f"{api_url(stack)}/identity/api-keys", headers=bearer(api_key),
                     params={"page_size": 100}).json()["keys"]
    return sorted(k["label"].split()[2] for k in keys
                  if k["label"].startswith("vera connect") and not k["revoked_at"])


async def rights(stack, token: str, propose: bool = False) -> set[str]:
    async with client(stack, token) as session:
        if propose:
            created = await session.call_tool("knowledge_propose", {
                **PROPOSAL, "runtime": "claude-code", "task_ref": "task-side-by-side"})
            assert not created.is_error, created.content
        return await granted(session)


def test_runtimes_side_by_side_keep_their_own_rights(auth_stack, runtime_bin, tmp_path):
    """Claude Code in suggest, then OpenCode in off in the same repository: OpenCode gets a
    read-only key and token of its own (no key typed), Claude Code keeps its proposal
    rights and files, and disconnecting OpenCode revokes its key alone. Each real runtime
    CLI connects with its own token."""
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_key = register(auth_stack)
    claude = connect(auth_stack, repo, env, api_key, "claude-code", "suggest")
    claude_files = {rel: (repo / rel).read_text() for rel in (
        ".mcp.json", ".claude/settings.json", ".claude/skills/vera/SKILL.md")}
    second = run_vera(repo, env, "connect", "opencode", "--api-url", api_url(auth_stack),
                      "--mcp-url", auth_stack.mcp_url, "--save-mode", "off", "--yes")
    assert second.returncode == 0, second.stdout + second.stderr
    opencode = (repo / credential_files("opencode").token).read_text()
    assert {rel: (repo / rel).read_text() for rel in claude_files} == claude_files
    claude_now = mcp_token(repo, env, "claude-code")
    assert {"READ", "PROPOSE"} <= anyio.run(rights, auth_stack, claude_now, True)
    assert anyio.run(rights, auth_stack, opencode) == {"READ"}
    assert live_connection_keys(auth_stack, api_key) == ["claude-code", "opencode"]
    # Each runtime's own CLI reaches VERA with its own token.
    listed = subprocess.run(["opencode", "mcp", "list"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert "✓ vera" in listed.stdout + listed.stderr, listed.stdout + listed.stderr
    handshake.approve_claude_server(repo, env)
    health = subprocess.run(["claude", "mcp", "get", "vera"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert "Connected" in health.stdout, health.stdout + health.stderr

    gone = run_vera(repo, env, "disconnect", "opencode", "--yes")
    assert gone.returncode == 0, gone.stderr
    assert live_connection_keys(auth_stack, api_key) == ["claude-code"]
    assert (repo / credential_files("claude-code").token).read_text() == claude
    report = run_vera(repo, env, "doctor", "claude-code")
    assert "ok   mcp token scopes" in report.stdout, report.stdout


# The real runtimes' rows ---------------------------------------------------------------------


@dataclass(frozen=True)
class Team:
    """The team a developer's agent works for: the curator's shared project, the fact it
    ingested, and the two people's API keys."""

    fact_key: str
    curator_key: str
    dev_key: str


@pytest.fixture(scope="module")
async def team(auth_stack) -> Team:
    """Two people register; the curator makes the shared project, invites the developer
    and ingests the team's knowledge (mapping the team's repository to the project), and
    the fact is searchable before any runtime starts."""
    async with httpx.AsyncClient(base_url=api_url(auth_stack), timeout=60) as api:
        accounts = [(await api.post("/identity/register", json={"display_name": name})).json()
                    for name in ("carol", "dev")]
        curator, dev = accounts
        project = await shared_project(api, curator, dev)
        exchanged = await api.post("/identity/mcp-token", headers=bearer(dev["api_key"]),
                                   json={"scopes": ["memory:read"]})
        assert exchanged.status_code == 200, exchanged.text
    async with client(auth_stack, exchanged.json()["access_token"]) as session:
        await ingested_fact_cited(session, project["seed_fact_key"])
    return Team(project["seed_fact_key"], curator["api_key"], dev["api_key"])


def team_clone(stack, runtime_bin: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The developer's clone of the team's repository, and a user home with nothing in it."""
    repo, env = project(stack, runtime_bin, tmp_path)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", REPOSITORY], check=True)
    return repo, env


HOOK_LINE = re.compile(r"knowledge_bootstrap arguments: (\{[^{}]*\})")


def hook_arguments(body: object) -> dict:
    """The bootstrap arguments VERA's session-start hook handed the model in one request
    (none when the hook's line is not in it)."""
    if isinstance(body, str):
        found = HOOK_LINE.search(body)
        return json.loads(found.group(1)) if found else {}
    children = body.values() if isinstance(body, dict) else body if isinstance(
        body, list) else ()
    return next((found for child in children if (found := hook_arguments(child))), {})


def hook_reached_the_model(bodies: list[dict]) -> bool:
    return any(hook_arguments(b).get("repository") == canonicalize(REPOSITORY) for b in bodies)


def session_plan(grounding: str, runtime: str, bodies: Callable[[], list[dict]], *,
                 persists: bool = False) -> Plan:
    """The scripted model, doing what VERA's skill tells it: bootstrap with the arguments
    the session-start hook gave it, ground the task in the project bootstrap selected with
    the read-only ``grounding`` tool (bound to the repository and branch, as the skill
    says), with ``persists`` also ask for the same context as a stored pack (a write),
    propose what it learned, then ask what became of it.
    ``bodies`` are the model's requests so far (the last one being answered)."""

    def plan(results: list[str]) -> tuple[str, dict] | None:
        arguments = hook_arguments(bodies()[-1])
        repository = {"repository_ref": arguments["repository"]} if arguments else {}
        query = {"query": "which database does payments-api use?", "project": PROJECT,
                 **arguments}
        steps = [
            ("knowledge_bootstrap", arguments),
            (grounding, query),
            *([("knowledge_get_context", {**query, "persist": True})] if persists else []),
            ("knowledge_propose", {"subject": "payments-api", "predicate": "retry_policy",
                                   "object": "three times with backoff",
                                   "evidence_text": "handler.py", "task_ref": task(runtime),
                                   "runtime": runtime, **repository}),
            ("knowledge_proposal_report", {"task_ref": task(runtime)}),
        ]
        return steps[len(results)] if len(results) < len(steps) else None

    return plan


def codex_user(env: dict[str, str], repo: Path, model: FakeResponses, runtime_bin: Path
               ) -> dict[str, str]:
    """The user's Codex config (the scripted model as its provider, the clone trusted) and
    the environment of a shell with nothing exported but its PATH and homes."""
    codex_home = Path(env["CODEX_HOME"])
    (codex_home / "config.toml").write_text(
        f'model = "fake-model"\nmodel_provider = "fake"\n[model_providers.fake]\n'
        f'name = "fake"\nbase_url = "{model.url}/v1"\nwire_api = "responses"\n'
        f'env_key = "FAKE_API_KEY"\n[projects."{repo}"]\ntrust_level = "trusted"\n')
    return {"PATH": shell_path(runtime_bin), "HOME": env["HOME"],
            "CODEX_HOME": str(codex_home), "FAKE_API_KEY": "x"}


def task(runtime: str) -> str:
    return f"task-{runtime}"


def grounded(seen: list[str], team: Team) -> None:
    """The tool results the model read: bootstrap selected the team's project for the
    repository, and the real server's answer cites the curator's ingested fact."""
    assert "selected" in seen[0] and PROJECT in seen[0], seen[0]
    assert all(cited in seen[1] for cited in (team.fact_key, SEED_OBJECT, SEED_SOURCE)), seen[1]


async def nothing_proposed(stack, team: Team, token: str, runtime: str) -> dict:
    """The server's proposal report for the session's task, as the developer reads it with
    the token connect stored: nothing created; and the project's review queue is empty.
    Returns the report's counts."""
    async with client(stack, token) as session:
        report = await session.call_tool("knowledge_proposal_report",
                                         {"task_ref": task(runtime)})
    assert not report.is_error, report.content
    counts = report.structured_content["counts"]
    assert counts["created"] == 0, counts
    async with httpx.AsyncClient(base_url=api_url(stack), timeout=60) as api:
        queue = await api.get(f"/curation/projects/{PROJECT}/proposals",
                              headers=bearer(team.curator_key))
    assert queue.status_code == 200, queue.text
    assert queue.json()["proposals"] == []
    return counts


def refused_by_the_server(seen: str) -> None:
    """What the model read for knowledge_get_context(persist=true) from a runtime whose
    credential cannot persist: the server's refusal (the client let the call through,
    ADR 0019). Codex shows the error's data (code and scope); OpenCode only its JSON-RPC
    code and message."""
    code, _ = ERROR_CODES["unauthorized"]
    assert ("unauthorized" in seen and "memory:snapshot" in seen) or f"{code}:" in seen, seen


def tool_results(bodies: list[dict]) -> list[str]:
    last = bodies[-1] if bodies else {}
    return [json.dumps(block.get("content")) for m in last.get("messages", [])
            if isinstance(m.get("content"), list) for block in m["content"]
            if block.get("type") == "tool_result"]


async def test_claude_code_headless_against_the_authenticated_gateway(
        auth_stack, team, runtime_bin, tmp_path) -> None:
    """From a shell with nothing exported, in a clone of the team's repository: `claude -p`
    reaches the real gateway with the token `vera connect` stored, bootstrap selects the
    team's project, get_context cites the curator's fact without a click (its persisted
    form asks, decided per call), the proposal in suggest mode is not written, and the
    server's proposal report agrees."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    token = connect(auth_stack, repo, env, team.dev_key, "claude-code", "suggest")
    handshake.approve_claude_server(repo, env)  # the one-time trust a person gives
    model = FakeAnthropic(plan=session_plan("knowledge_get_context", "claude-code",
                                            lambda: model.bodies, persists=True))
    try:
        clean = {"PATH": shell_path(runtime_bin), "HOME": env["HOME"],
                 "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-ant-fake",
                 "ENABLE_TOOL_SEARCH": "false", "DISABLE_AUTOUPDATER": "1",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1"}
        done = await anyio.to_thread.run_sync(lambda: subprocess.run(
            ["claude", "-p", "which database does payments-api use?", "--output-format",
             "json"], cwd=repo, env=clean, capture_output=True, text=True, timeout=240,
            stdin=subprocess.DEVNULL))
    finally:
        model.close()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert hook_reached_the_model(model.bodies)
    results = tool_results(model.bodies)
    assert len(results) == 5, (results, done.stdout[-2000:])
    grounded(results, team)
    outcome = json.loads(done.stdout)
    denied = [d["tool_name"] for d in outcome.get("permission_denials", [])]
    # Only the writes asked a click: the same get_context, decided per call, asks for
    # persist=true; headless, a question is a refusal.
    assert denied == ["mcp__vera__knowledge_get_context", "mcp__vera__knowledge_propose"]
    counts = await nothing_proposed(auth_stack, team, token, "claude-code")
    seen = json.loads(json.loads(results[4]))  # the report as the model read it
    assert seen["counts"] == counts


async def test_codex_headless_against_the_authenticated_gateway(
        auth_stack, team, runtime_bin, tmp_path) -> None:
    """`codex exec` in a clone of the team's repository, from a shell with nothing exported
    (Codex runs `vera mcp-token --runtime codex --headers`, its http_headers_helper):
    bootstrap selects the team's project, get_context cites the curator's fact without an
    approval (the server lists it read-only for Codex's credential, which cannot persist:
    ADR 0019), its persisted form is refused by the server (`unauthorized`,
    memory:snapshot), the
    suggest-mode proposal is not written, and the proposal report agrees."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    done = run_vera(repo, env, "connect", "codex", "--api-url", api_url(auth_stack),
                    "--mcp-url", auth_stack.mcp_url, "--yes", "--api-key-stdin",
                    stdin=team.dev_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    model = FakeResponses(plan=session_plan("knowledge_get_context", "codex",
                                            lambda: model.bodies, persists=True))
    clean = codex_user(env, repo, model, runtime_bin)
    try:
        # Hook hash trust is a user-home review step; this one invocation bypasses it.
        ran = await anyio.to_thread.run_sync(lambda: subprocess.run(
            ["codex", "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
             "which database does payments-api use?"], cwd=repo, env=clean,
            capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL))
    finally:
        model.close()
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert hook_reached_the_model(model.bodies)
    outputs = [str(item.get("output")) for body in model.bodies[-1:]
               for item in body.get("input", [])
               if isinstance(item, dict) and item.get("type", "").endswith("call_output")]
    assert len(outputs) == 5, (outputs, ran.stderr[-2000:])
    grounded(outputs, team)
    refused_by_the_server(outputs[2])
    token = (repo / credential_files("codex").token).read_text()
    counts = await nothing_proposed(auth_stack, team, token, "codex")
    seen = json.loads(outputs[4][outputs[4].index("{"):])  # after Codex's own preamble
    assert seen["counts"] == counts  # the model agrees


def codex_interactive_turn(repo: Path, env: dict[str, str], question: str) -> list[dict]:
    """One turn of an interactive Codex (``codex app-server``, the protocol Codex's own UIs
    speak) with approval policy ``on-request``, as a person at the prompt would run it.
    Every approval Codex asks for is answered "no". Returns those approval requests."""
    server = subprocess.Popen(["codex", "app-server"], cwd=repo, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    assert server.stdin is not None and server.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    stdout, stdin = server.stdout, server.stdin
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()

    def send(message: dict) -> None:
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    def until(done: Callable[[dict], bool], asked: list[dict]) -> dict:
        deadline = time.monotonic() + 180
        while (left := deadline - time.monotonic()) > 0:
            message = json.loads(lines.get(timeout=left))
            if "method" in message and "id" in message:  # Codex asks the person
                asked.append(message)
                declined = ({"action": "decline"} if "elicitation" in message["method"]
                            else {"answers": {}})
                send({"id": message["id"], "result": declined})
            elif done(message):
                return message
        raise AssertionError("codex app-server did not finish the turn")

    asked: list[dict] = []
    try:
        send({"id": 1, "method": "initialize",
              "params": {"clientInfo": {"name": "vera-test", "version": "1"}}})
        until(lambda m: m.get("id") == 1, asked)
        send({"method": "initialized"})
        send({"id": 2, "method": "thread/start", "params": {
            "cwd": str(repo), "approvalPolicy": "on-request", "sandbox": "workspace-write"}})
        thread = until(lambda m: m.get("id") == 2, asked)["result"]["thread"]["id"]
        send({"id": 3, "method": "turn/start", "params": {
            "threadId": thread, "input": [{"type": "text", "text": question}]}})
        until(lambda m: m.get("method") == "turn/completed", asked)
    finally:
        server.kill()
        server.wait()
    return asked


async def test_interactive_codex_asks_for_the_write_only(
        auth_stack, team, runtime_bin, tmp_path) -> None:
    """Interactive Codex (approval policy on-request): knowledge_get_context answers with
    the curator's fact without a question, its persisted form reaches the server and is
    refused there, and the one approval Codex asks for is the proposal's (ADR 0019)."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    token = connect(auth_stack, repo, env, team.dev_key, "codex", "suggest")
    query = {"query": "which database does payments-api use?", "project": PROJECT}
    steps = [("knowledge_get_context", query),
             ("knowledge_get_context", {**query, "persist": True}),
             ("knowledge_propose", {"subject": "payments-api", "predicate": "retry_policy",
                                    "object": "three times", "evidence_text": "handler.py",
                                    "task_ref": task("codex-interactive"), "runtime": "codex"})]
    model = FakeResponses(plan=lambda results: steps[len(results)] if len(results) < len(
        steps) else None)
    clean = codex_user(env, repo, model, runtime_bin)
    try:
        asked = await anyio.to_thread.run_sync(codex_interactive_turn, repo, clean,
                                               "which database does payments-api use?")
    finally:
        model.close()
    outputs = [str(item.get("output")) for body in model.bodies[-1:]
               for item in body.get("input", [])
               if isinstance(item, dict) and item.get("type", "").endswith("call_output")]
    assert len(outputs) == 3, (outputs, asked)
    assert all(cited in outputs[0] for cited in (team.fact_key, SEED_OBJECT)), outputs[0]
    refused_by_the_server(outputs[1])
    assert len(asked) == 1 and "knowledge_propose" in json.dumps(asked[0]), asked
    await nothing_proposed(auth_stack, team, token, "codex-interactive")


async def test_opencode_headless_against_the_authenticated_gateway(
        auth_stack, team, runtime_bin, tmp_path, opencode_home, opencode_plugin_sdk) -> None:
    """`opencode run` in a clone of the team's repository, from a shell with nothing
    exported, reading the token through its own `{file:}` substitution: bootstrap selects
    the team's project, get_context cites the curator's fact without an approval (its rule
    allows it: the credential cannot persist, ADR 0019), its persisted form is refused by
    the server (`unauthorized`, memory:snapshot), the suggest-mode proposal is refused by
    the `ask` rule (headless OpenCode ends the run there) and not written, as the server's
    proposal report shows."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    token = connect(auth_stack, repo, env, team.dev_key, "opencode", "suggest")
    model = FakeChat(plan=session_plan("knowledge_get_context", "opencode",
                                       lambda: model.bodies, persists=True))
    config = json.loads((repo / "opencode.json").read_text())
    config.update({"model": "fake/m", "provider": {"fake": {
        "npm": "@ai-sdk/openai-compatible", "name": "Fake",
        "options": {"baseURL": model.url + "/v1", "apiKey": "x"},
        "models": {"m": {"name": "m", "tool_call": True}}}}})
    (repo / "opencode.json").write_text(json.dumps(config, indent=2))
    clean = {**sessions.opencode_env(opencode_home), "PATH": shell_path(runtime_bin)}
    try:
        ran = await anyio.to_thread.run_sync(lambda: subprocess.run(
            ["opencode", "run", "which database does payments-api use?"], cwd=repo,
            env=clean, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL))
    finally:
        model.close()
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert hook_reached_the_model(model.bodies)
    outputs = [str(m.get("content")) for body in model.bodies[-1:]
               for m in body.get("messages", []) if m.get("role") == "tool"]
    assert len(outputs) == 3, (outputs, ran.stderr[-2000:])
    grounded(outputs, team)
    refused_by_the_server(outputs[2])
    asked = [c["function"]["name"] for body in model.bodies[-1:] for m in body.get("messages", [])
             if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
    assert asked == ["vera_knowledge_bootstrap", *["vera_knowledge_get_context"] * 2]
    assert await nothing_proposed(auth_stack, team, token, "opencode") == {
        "conflicted": 0, "created": 0, "deduplicated": 0, "rejected": 0, "skipped": 0}


# The second half of the loop ---------------------------------------------------------------

LEARNED = {"subject": "payments-api", "predicate": "retry_policy",
           "evidence_text": "handler.py retries", "branch": "main",
           "code_path": "services/payments/handler.py"}
QUESTION = "how does payments-api retry?"
GROUNDING = "knowledge_get_context"
# A session: given the steps the scripted model takes (from the arguments the session-start
# hook handed it), the tool results it read, as text, in order.
Session = Callable[[Callable[[dict], list[tuple[str, dict]]]], list[str]]


def learned(runtime: str) -> str:
    """What each runtime's session learns (each its own, so one row's verified fact is not
    another row's duplicate)."""
    return f"five times with jitter, as {runtime} found"


def _verify_in_console(stack, curator_key: str, fact_key: str, runtime: str) -> None:
    """The curator, in Chromium: signs in, finds the runtime's proposal in the project's
    queue with the runtime, repository, branch and path it came from, and verifies it."""
    sys.path.append(str(Path(__file__).resolve().parents[1] / "console"))
    from browser import chromium
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium()
    try:
        wait = WebDriverWait(driver, 60)
        driver.get(f"{api_url(stack)}/console/")
        wait.until(ready.url_contains("/console/sign-in"))
        driver.find_element(By.ID, "api_key").send_keys(curator_key)
        driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
        row = (By.CSS_SELECTOR, f"[data-project={PROJECT}] a")
        wait.until(ready.presence_of_element_located(row)).click()
        article = wait.until(ready.presence_of_element_located(
            (By.CSS_SELECTOR, f"article.proposal[data-fact-key='{fact_key}']")))
        shown = {dd.get_attribute("data-context"): dd.text
                 for dd in article.find_elements(By.CSS_SELECTOR, "dd[data-context]")}
        assert shown == {"runtime": runtime, "repository": canonicalize(REPOSITORY),
                         "branch": LEARNED["branch"], "path": LEARNED["code_path"]}, shown
        article.find_element(By.XPATH, ".//button[normalize-space()='Verify']").click()
        wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "[data-outcome=verified]")))
    finally:
        driver.quit()


async def _second_half(stack, team: Team, runtime: str, session: Session) -> None:
    """The runtime's session proposes what it learned (auto-propose: no prompt), the curator
    verifies it in the console, and a new session grounds with knowledge_get_context (no
    prompt in any runtime, ADR 0019) and its model reads the verified fact, cited and
    marked verified."""
    found = {**LEARNED, "object": learned(runtime)}

    def learn(arguments: dict) -> list[tuple[str, dict]]:
        return [("knowledge_bootstrap", arguments),
                ("knowledge_propose", {**found, "task_ref": task(f"{runtime}-loop"),
                                       "runtime": runtime,
                                       "repository_ref": arguments.get("repository", "")})]

    read = await anyio.to_thread.run_sync(session, learn)
    assert len(read) == 2, read
    async with httpx.AsyncClient(base_url=api_url(stack), timeout=60) as api:
        queue = await api.get(f"/curation/projects/{PROJECT}/proposals",
                              headers=bearer(team.curator_key))
        exchanged = await api.post("/identity/mcp-token", headers=bearer(team.dev_key),
                                   json={"scopes": ["memory:read"]})
    [proposed] = [p for p in queue.json()["proposals"] if p["object"] == found["object"]]
    await anyio.to_thread.run_sync(_verify_in_console, stack, team.curator_key,
                                   proposed["fact_key"], runtime)

    query = {"query": QUESTION, "project": PROJECT}
    async with client(stack, exchanged.json()["access_token"]) as reader:
        for _ in range(240):  # until retrieval has indexed the verified version
            answer = (await reader.call_tool(GROUNDING, query)).structured_content
            served = [r for r in answer["results"] if r["object"] == found["object"]]
            if served:
                break
            await anyio.sleep(0.5)
    [fact] = served
    assert fact["citations"][0]["verification"] == "verified"

    def ground(arguments: dict) -> list[tuple[str, dict]]:
        return [("knowledge_bootstrap", arguments), (GROUNDING, {**query, **arguments})]

    read = await anyio.to_thread.run_sync(session, ground)
    assert all(part in read[1] for part in (fact["fact_key"], found["object"], "verified")), \
        read[1]


def _steps_plan(steps: Callable[[dict], list[tuple[str, dict]]],
                bodies: Callable[[], list[dict]]) -> Plan:
    def plan(results: list[str]) -> tuple[str, dict] | None:
        chosen = steps(hook_arguments(bodies()[-1]))
        return chosen[len(results)] if len(results) < len(chosen) else None

    return plan


async def test_claude_codes_proposal_is_verified_in_the_console_and_served_back(
        auth_stack, team, runtime_bin, tmp_path) -> None:
    """The loop's second half with Claude Code: connected in auto-propose, a headless
    `claude -p` proposes through the real gateway without a prompt; the curator verifies it
    in the console; a new session's model is served it by knowledge_get_context."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    connect(auth_stack, repo, env, team.dev_key, "claude-code", "auto-propose")
    handshake.approve_claude_server(repo, env)
    clean = {"PATH": shell_path(runtime_bin), "HOME": env["HOME"],
             "ANTHROPIC_API_KEY": "sk-ant-fake", "ENABLE_TOOL_SEARCH": "false",
             "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
             "IS_SANDBOX": "1"}

    def session(steps: Callable[[dict], list[tuple[str, dict]]]) -> list[str]:
        model = FakeAnthropic(plan=_steps_plan(steps, lambda: model.bodies))
        try:
            done = subprocess.run(
                ["claude", "-p", QUESTION, "--output-format", "json"], cwd=repo,
                env={**clean, "ANTHROPIC_BASE_URL": model.url}, capture_output=True,
                text=True, timeout=240, stdin=subprocess.DEVNULL)
        finally:
            model.close()
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert json.loads(done.stdout).get("permission_denials", []) == []
        return [json.loads(r) for r in tool_results(model.bodies)]

    await _second_half(auth_stack, team, "claude-code", session)


async def test_codexs_proposal_is_verified_in_the_console_and_served_back(
        auth_stack, team, runtime_bin, tmp_path) -> None:
    """The same with `codex exec` (its token from its headers helper; it grounds with
    knowledge_get_context, which asks nothing for its credential)."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    done = run_vera(repo, env, "connect", "codex", "--api-url", api_url(auth_stack),
                    "--mcp-url", auth_stack.mcp_url, "--save-mode", "auto-propose", "--yes",
                    "--api-key-stdin", stdin=team.dev_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr

    def session(steps: Callable[[dict], list[tuple[str, dict]]]) -> list[str]:
        model = FakeResponses(plan=_steps_plan(steps, lambda: model.bodies))
        clean = codex_user(env, repo, model, runtime_bin)
        try:
            ran = subprocess.run(
                ["codex", "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                 QUESTION], cwd=repo, env=clean,
                capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
        finally:
            model.close()
        assert ran.returncode == 0, ran.stderr[-2000:]
        return [str(item.get("output")) for body in model.bodies[-1:]
                for item in body.get("input", [])
                if isinstance(item, dict) and item.get("type", "").endswith("call_output")]

    await _second_half(auth_stack, team, "codex", session)


async def test_opencodes_proposal_is_verified_in_the_console_and_served_back(
        auth_stack, team, runtime_bin, tmp_path, opencode_home, opencode_plugin_sdk) -> None:
    """The same with `opencode run` (it grounds with knowledge_get_context too)."""
    repo, env = team_clone(auth_stack, runtime_bin, tmp_path)
    connect(auth_stack, repo, env, team.dev_key, "opencode", "auto-propose")
    connected = json.loads((repo / "opencode.json").read_text())
    clean = {**sessions.opencode_env(opencode_home), "PATH": shell_path(runtime_bin)}

    def session(steps: Callable[[dict], list[tuple[str, dict]]]) -> list[str]:
        model = FakeChat(plan=_steps_plan(steps, lambda: model.bodies))
        config = {**connected, "model": "fake/m", "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible", "name": "Fake",
            "options": {"baseURL": model.url + "/v1", "apiKey": "x"},
            "models": {"m": {"name": "m", "tool_call": True}}}}}
        (repo / "opencode.json").write_text(json.dumps(config, indent=2))
        try:
            ran = subprocess.run(["opencode", "run", QUESTION], cwd=repo, env=clean,
                                 capture_output=True, text=True, timeout=240,
                                 stdin=subprocess.DEVNULL)
        finally:
            model.close()
        assert ran.returncode == 0, ran.stderr[-2000:]
        return [str(m.get("content")) for body in model.bodies[-1:]
                for m in body.get("messages", []) if m.get("role") == "tool"]

    await _second_half(auth_stack, team, "opencode", session)
