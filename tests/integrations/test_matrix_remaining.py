"""The GUIDE's verification-matrix rows the other integration tests leave open: each kind of
refused credential, the bootstrap outcomes the kit hands to the agent, a multi-root
workspace, managed policies, and quota or transient failures seen by the SessionStart hook.
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
import runtime_cli as cli
from standin import API_KEY, CONNECTION_KEY, StandIn
from test_hooks_session_start import bootstrap_arguments, git, probe_server, run_hook, status

from vera.integrations.artifacts import hook_source
from vera.integrations.ownership import credential_files
from vera.integrations.runtimes import claude_code
from vera.integrations.skill import render_skill

AUDIENCE = "https://mcp.test"  # what the stand-in's protected-resource metadata names
SECRET = "stand-in-signing-key-of-at-least-32-bytes"


def token(**claims: object) -> str:
    return jwt.encode({"iss": "vera", "sub": "p", "aud": AUDIENCE, **claims}, SECRET,
                      algorithm="HS256")


GOOD = token()
EXPIRED = token(exp=int(time.time()) - 3600)
FOREIGN = token(aud="https://another-service.test")
SHORT = token(scope="memory:propose")
UNSIGNED = token(iss="someone-else")


def connect(vera, standin, runtime="codex", *extra, stdin=None):
    return vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes", *extra, stdin=stdin)


def tools_line(report: str) -> str:
    return next(line.strip() for line in report.splitlines() if "vera tools visible" in line)


# Missing auth, expired auth, wrong audience, and insufficient tool scopes.

@pytest.mark.parametrize(("presented", "reason"), [
    (EXPIRED, "expired"), (FOREIGN, "wrong_audience"), (SHORT, "insufficient_scope"),
    (UNSIGNED, "rejected")])
def test_doctor_names_each_refused_credential(vera, repo, presented, reason) -> None:
    with StandIn(auth=GOOD, short_of={SHORT: "memory:read"}) as standin:
        assert connect(vera, standin, "codex", "--api-key-stdin",
                       stdin=API_KEY + "\n").returncode == 0
        # the user's token file, gone stale
        (repo / credential_files("codex").token).write_text(presented)
        report = vera("doctor", "codex", env={"VERA_MCP_TOKEN": presented})
    assert report.returncode == 1
    assert tools_line(report.stdout).startswith(
        f"TODO vera tools visible: cannot list tools: {reason}: ")
    assert presented not in report.stdout + report.stderr
    if reason == "insufficient_scope":
        assert "memory:read" in tools_line(report.stdout)
    if reason == "wrong_audience":
        assert AUDIENCE in tools_line(report.stdout)


def test_doctor_checks_the_identity_provider_a_runtime_signs_in_with(vera) -> None:
    """The runtime keeps its OAuth token in its own store: doctor does not list tools
    without one, it checks the provider the deployment names (here one that does not
    answer; tests/e2e/test_oidc_provider.py has a real one that does)."""
    with StandIn(auth=GOOD, oauth_issuer="https://issuer.test") as standin:
        assert connect(vera, standin, "claude-code").returncode == 0
        report = vera("doctor", "claude-code")
    [sign_in] = [line for line in report.stdout.splitlines() if "vera sign-in" in line]
    assert sign_in.strip().startswith("TODO") and "https://issuer.test" in sign_in
    assert "vera tools visible" not in report.stdout


@pytest.mark.parametrize("minted", [EXPIRED, FOREIGN, SHORT])
def test_connect_never_stores_a_token_the_mcp_endpoint_refuses(vera, repo, minted) -> None:
    with StandIn(auth=GOOD, minted=minted, short_of={SHORT: "memory:read"}) as standin:
        done = connect(vera, standin, "codex", "--api-key-stdin", stdin=API_KEY + "\n")
    assert CONNECTION_KEY in standin.revoked  # the key made for this connection is revoked
    assert done.returncode == 2
    assert not (repo / credential_files("codex").token).exists()
    assert not (repo / ".codex").exists()
    assert minted not in done.stdout + done.stderr and API_KEY not in done.stdout + done.stderr


def test_connect_stores_a_token_the_mcp_endpoint_accepts(vera, repo) -> None:
    with StandIn(auth=GOOD) as standin:
        done = connect(vera, standin, "codex", "--api-key-stdin", stdin=API_KEY + "\n")
        report = vera("doctor", "codex", env={"VERA_MCP_TOKEN": GOOD})
    assert done.returncode == 0, done.stderr
    assert (repo / credential_files("codex").token).read_text() == GOOD
    assert tools_line(report.stdout) == "ok   vera tools visible: 2 tools"


# One mapped project, several ambiguous projects, one out of scope; a local principal with a
# personal scope only. The hook only hands the agent sanitized bootstrap arguments; the
# agent's knowledge_bootstrap call resolves them, and the behaviour skill says what to do
# with each resolution and error.

@pytest.fixture
def hook(tmp_path: Path) -> Path:
    path = tmp_path / "vera_hook.py"
    path.write_text(hook_source())
    return path


def committed_repo(root: Path, remote: str) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    git(root, "remote", "add", "origin", remote)
    return root


def test_mapped_project_hook_emits_the_repository_identity(hook, tmp_path) -> None:
    root = committed_repo(tmp_path / "payments", "git@github.com:acme/payments.git")
    specific, _ = run_hook(hook, root)
    assert bootstrap_arguments(specific["additionalContext"]) == {
        "repository": "github.com/acme/payments", "branch": "main"}


@pytest.mark.parametrize(("outcome", "action"), [
    ("selection_required", "ask the\n  user which project"),
    ("ambiguous_project", "Ask the user to select a project"),
    ("project_out_of_scope", "Do not guess another project"),
    ("personal_only", "personal scope"),
    ("unmapped", "personal scope"),
    ("unsupported_repository", "without the\n  repository"),
])
def test_each_bootstrap_resolution_has_its_agent_action(outcome, action) -> None:
    text = render_skill("suggest")
    assert f"`{outcome}`" in text
    paragraph = next(p for p in text.split("\n\n") if f"`{outcome}`" in p)
    assert action in paragraph


# A multi-root workspace: a folder holding two repositories is no project of its own;
# connect refuses there and each root is connected, and bootstrapped, on its own.

def test_multi_root_workspace_is_connected_per_root(vera, hook, tmp_path) -> None:
    workspace = tmp_path / "workspace"
    api = committed_repo(workspace / "api", "https://github.com/acme/api.git")
    web = committed_repo(workspace / "web", "https://github.com/acme/web.git")
    with StandIn() as standin:
        refused = vera("connect", "claude-code", "--api-url", standin.url, "--mcp-url",
                       standin.mcp_url, "--yes", cwd=workspace)
        assert refused.returncode == 2
        assert not (workspace / ".mcp.json").exists()
        for root in (api, web):
            done = vera("connect", "claude-code", "--api-url", standin.url, "--mcp-url",
                        standin.mcp_url, "--yes", cwd=root)
            assert done.returncode == 0, done.stderr
            assert (root / ".mcp.json").exists()
    identities = {bootstrap_arguments(run_hook(hook, root)[0]["additionalContext"])[
        "repository"] for root in (api, web)}
    assert identities == {"github.com/acme/api", "github.com/acme/web"}


# Offline VERA, timeout, quota, and transient server failure: the hook only GETs /readyz and
# fails open on every one of them.

def test_quota_exceeded_readiness_fails_open_degraded(hook, tmp_path) -> None:
    root = committed_repo(tmp_path / "repo", "https://github.com/acme/repo.git")
    with probe_server(429) as (url, seen):
        specific, _ = run_hook(hook, root, api_url=url)
    assert len(seen) == 1
    assert status(specific["additionalContext"]) == "degraded"
    assert bootstrap_arguments(specific["additionalContext"])["branch"] == "main"


@pytest.fixture
def resetting_listener() -> Iterator[str]:
    """Accepts each connection and resets it at once: a transient server failure."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        sock.close()


def test_transient_connection_reset_fails_open_degraded(hook, tmp_path,
                                                        resetting_listener) -> None:
    root = committed_repo(tmp_path / "repo", "https://github.com/acme/repo.git")
    specific, _ = run_hook(hook, root, api_url=resetting_listener)
    assert status(specific["additionalContext"]) == "degraded"


def test_truncated_readiness_answer_fails_open_degraded(hook, tmp_path) -> None:
    class Truncated(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")

        def log_message(self, *args: object) -> None:
            pass

    root = committed_repo(tmp_path / "repo", "https://github.com/acme/repo.git")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Truncated)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        specific, raw = run_hook(hook, root,
                                    api_url=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert status(specific["additionalContext"]) in ("available", "degraded")
    json.loads(raw)


# A managed policy that blocks hooks or MCP: ``managed_etc`` (conftest) is a private /etc.

def doctor_under_policy(repo, home_env, runtime_bin, etc: Path, runtime: str):
    env = {**home_env, "PATH": f"{runtime_bin}:{home_env['PATH']}"}
    script = f'mount --bind "{etc}" /etc && exec "{sys.executable}" -m vera.cli doctor {runtime}'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)


def finding(report: str, name: str) -> str:
    return next(line.strip() for line in report.splitlines() if f" {name}:" in line)


def test_claude_managed_policy_blocking_mcp_is_named_by_doctor(
        repo, vera, home_env, runtime_bin, managed_etc) -> None:
    with StandIn() as standin:
        assert connect(vera, standin, "claude-code").returncode == 0
    (managed_etc / "claude-code" / "managed-settings.json").write_text(
        json.dumps({"deniedMcpServers": [{"serverName": "vera"}]}))
    report = doctor_under_policy(repo, home_env, runtime_bin, managed_etc, "claude-code")
    assert report.returncode == 1
    assert finding(report.stdout, "claude managed policy").startswith(
        "TODO claude managed policy: blocks the vera MCP server")
    assert (repo / ".mcp.json").exists()  # reported, never worked around


def test_claude_managed_policy_blocking_hooks_is_named_by_doctor(
        repo, vera, home_env, runtime_bin, managed_etc) -> None:
    with StandIn() as standin:
        assert connect(vera, standin, "claude-code").returncode == 0
    (managed_etc / "claude-code" / "managed-settings.json").write_text(
        json.dumps({"allowManagedHooksOnly": True}))
    report = doctor_under_policy(repo, home_env, runtime_bin, managed_etc, "claude-code")
    assert report.returncode == 1
    assert finding(report.stdout, "claude managed policy").startswith(
        "TODO claude managed policy: blocks project hooks")


@pytest.mark.parametrize(("policy", "blocks"), [
    ({"deniedMcpServers": [{"serverName": "vera"}]}, ["blocks the vera MCP server"]),
    ({"allowManagedMcpServersOnly": True}, ["blocks the vera MCP server"]),
    ({"allowedMcpServers": [{"serverName": "another"}]}, ["blocks the vera MCP server"]),
    ({"allowedMcpServers": [{"serverName": "vera"}]}, []),
    ({"disableAllHooks": True}, ["blocks project hooks"]),
    ({"deniedMcpServers": [{"serverName": "another"}], "disableAllHooks": False}, []),
])
def test_claude_managed_policy_shapes(tmp_path, monkeypatch, policy, blocks) -> None:
    settings = tmp_path / "managed-settings.json"
    settings.write_text(json.dumps(policy))
    monkeypatch.setattr(claude_code, "MANAGED_SETTINGS", settings)
    assert [b.split(" (")[0] for b in claude_code._managed_blocks()] == blocks


def test_claude_without_managed_policy_reports_none(repo, vera, home_env, runtime_bin,
                                                     managed_etc) -> None:
    with StandIn() as standin:
        assert connect(vera, standin, "claude-code").returncode == 0
    report = doctor_under_policy(repo, home_env, runtime_bin, managed_etc, "claude-code")
    assert finding(report.stdout, "claude managed policy") == (
        "ok   claude managed policy: none blocks vera")


# Codex reads its managed requirements only from /etc/codex/requirements.toml.

@pytest.mark.parametrize(("requirements", "block"), [
    ('[mcp_servers.another.identity]\nurl = "https://elsewhere.test/mcp"\n',
     "disables the vera server"),
    ("allow_managed_hooks_only = true\n", "blocks project hooks"),
])
def test_codex_managed_requirements_blocking_mcp_or_hooks_are_named_by_doctor(
        repo, vera, home_env, runtime_bin, managed_etc, requirements, block) -> None:
    with StandIn() as standin:
        assert connect(vera, standin, "codex").returncode == 0
    cli.trust_codex_project(repo, home_env)
    (managed_etc / "codex").mkdir(exist_ok=True)
    (managed_etc / "codex" / "requirements.toml").write_text(requirements)
    report = doctor_under_policy(repo, home_env, runtime_bin, managed_etc, "codex")
    assert report.returncode == 1
    assert finding(report.stdout, "codex managed policy").startswith(
        f"TODO codex managed policy: {block}")
    assert (repo / ".codex" / "config.toml").exists()  # reported, never worked around


def test_codex_without_managed_requirements_reports_none(repo, vera, home_env, runtime_bin,
                                                         managed_etc) -> None:
    with StandIn() as standin:
        assert connect(vera, standin, "codex").returncode == 0
    cli.trust_codex_project(repo, home_env)
    report = doctor_under_policy(repo, home_env, runtime_bin, managed_etc, "codex")
    assert finding(report.stdout, "codex managed policy") == (
        "ok   codex managed policy: none blocks vera")


@pytest.mark.parametrize(("mode", "scopes", "ok"), [
    ("off", "memory:read", True),
    ("off", "memory:read memory:snapshot memory:feedback", False),  # an old off token
    ("suggest", "memory:read memory:feedback", False),  # cannot propose
    ("suggest", "memory:read memory:feedback memory:propose", True),
    # OpenCode approves per tool, so its credential never persists (ADR 0019).
    ("suggest", "memory:read memory:snapshot memory:feedback memory:propose", False)])
def test_doctor_checks_the_token_holds_exactly_its_modes_scopes(vera, mode, scopes,
                                                                 ok) -> None:
    presented = token(scope=scopes)
    with StandIn(auth=presented) as standin:
        done = connect(vera, standin, "opencode", "--save-mode", mode, "--api-key-stdin",
                       stdin=API_KEY + "\n")
        report = vera("doctor", "opencode")
    assert done.returncode == 0, done.stderr
    line = next(ln.strip() for ln in report.stdout.splitlines() if "mcp token scopes" in ln)
    assert line.startswith("ok" if ok else "TODO")


@pytest.mark.parametrize("reason", ["token_expired", "key_revoked", "token_outdated",
                                    "principal_disabled"])
def test_doctor_names_a_token_the_server_wants_renewed(vera, repo, reason) -> None:
    """The gateway says why it refuses a built-in token that a new connect fixes (issue 39
    item 4); doctor passes the reason on with `vera connect` as the fix."""
    stale = token(vera_key_id="k1")
    with StandIn(auth=GOOD, renewable={stale: reason}) as standin:
        assert connect(vera, standin, "opencode", "--api-key-stdin",
                       stdin=API_KEY + "\n").returncode == 0
        (repo / credential_files("opencode").token).write_text(stale)
        report = vera("doctor", "opencode")
    assert report.returncode == 1
    line = tools_line(report.stdout)
    assert line.startswith(f"TODO vera tools visible: cannot list tools: {reason}: ")
    assert "`vera connect`" in line and stale not in report.stdout
