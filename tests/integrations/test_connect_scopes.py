"""Connect looks outside the project before it writes anything: a ``vera`` server in the
runtime's user, local or managed scope that the runtime would use, or merge into the
project's, stops it (exit 3, stable code, nothing written or minted); managed policy against
VERA's server stops it too, and managed policy against project hooks is a warning.

Real files in a temp home (and a private /etc for managed files); the real CLIs show the
runtime would indeed use or merge the other scope's server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import runtime_cli as cli
from standin import StandIn

from vera.integrations.runtimes import scopes

ELSEWHERE = "http://127.0.0.1:9/mcp"  # the other scope's server: never contacted


def connect(vera, standin: StandIn, runtime: str):
    return vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes")


def connect_under(etc: Path, repo: Path, env: dict[str, str], standin: StandIn,
                  runtime: str) -> subprocess.CompletedProcess:
    """``vera connect`` with ``etc`` mounted as /etc in a private namespace."""
    script = (f'mount --bind "{etc}" /etc && exec "{sys.executable}" -m vera.cli connect '
              f'{runtime} --api-url {standin.url} --mcp-url {standin.mcp_url} --yes')
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)


def codes(stderr: str, kind: str) -> list[str]:
    return [line.split(": ")[1] for line in stderr.splitlines() if line.startswith(f"{kind}: ")]


def untouched(repo: Path) -> bool:
    done = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=repo,
                          capture_output=True, text=True, check=True)
    return done.stdout == ""


def assert_refused(done: subprocess.CompletedProcess, repo: Path, standin: StandIn,
                   code: str) -> None:
    assert done.returncode == 3, done.stderr
    assert code in codes(done.stderr, "conflict")
    assert untouched(repo)
    assert standin.requests == []  # nothing probed, no key made, no token minted


def test_claude_local_scope_server_is_a_conflict(repo, vera, home_env, runtime_bin) -> None:
    state = Path(home_env["HOME"]) / ".claude.json"
    state.write_text(json.dumps({"projects": {str(repo): {"mcpServers": {
        "vera": {"type": "http", "url": ELSEWHERE}}}}}))
    with StandIn() as standin:
        done = connect(vera, standin, "claude-code")
        assert_refused(done, repo, standin, scopes.SHADOWING_LOCAL_SERVER)
        # Claude Code would use the local entry over a project .mcp.json one.
        (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"vera": {
            "type": "http", "url": standin.mcp_url}}}))
        shown = cli.claude_get(runtime_bin, repo, home_env)
    assert ELSEWHERE in shown and standin.mcp_url not in shown


def test_claude_user_scope_server_is_a_warning(repo, vera, home_env, runtime_bin) -> None:
    state = Path(home_env["HOME"]) / ".claude.json"
    state.write_text(json.dumps({"mcpServers": {"vera": {"type": "http", "url": ELSEWHERE}}}))
    with StandIn() as standin:
        done = connect(vera, standin, "claude-code")
        assert done.returncode == 0, done.stderr
        assert codes(done.stderr, "warning") == [scopes.OVERRIDDEN_USER_SERVER]
        # The project's server is the one Claude Code uses here.
        shown = cli.claude_get(runtime_bin, repo, home_env)
    assert standin.mcp_url in shown and ELSEWHERE not in shown


def test_codex_user_scope_server_is_a_conflict(repo, vera, home_env, runtime_bin) -> None:
    config = Path(home_env["CODEX_HOME"]) / "config.toml"
    config.write_text(f'[mcp_servers.vera]\nurl = "{ELSEWHERE}"\n'
                      'bearer_token_env_var = "TEAM_TOKEN"\n')
    with StandIn() as standin:
        done = connect(vera, standin, "codex")
        assert_refused(done, repo, standin, scopes.MERGING_USER_SERVER)
        # Codex merges the user's keys into the project's server.
        (repo / ".codex").mkdir()
        (repo / ".codex" / "config.toml").write_text(
            f'[mcp_servers.vera]\nurl = "{standin.mcp_url}"\n'
            'http_headers_helper = "vera mcp-token --headers"\n')
    cli.trust_codex_project(repo, home_env)
    server = cli.codex_get(runtime_bin, repo, home_env)
    assert server is not None
    assert server["transport"]["url"] == standin.mcp_url
    assert server["transport"]["bearer_token_env_var"] == "TEAM_TOKEN"


def opencode_mcp(runtime_bin: Path, repo: Path, env: dict[str, str]) -> dict:
    done = cli.opencode_config(runtime_bin, repo, env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout[done.stdout.index("{"):])["mcp"]["vera"]


def test_opencode_global_server_is_a_conflict(repo, vera, home_env, runtime_bin) -> None:
    folder = Path(home_env["XDG_CONFIG_HOME"]) / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(json.dumps({"mcp": {"vera": {
        "type": "remote", "url": ELSEWHERE, "headers": {"X-Team": "t"}}}}))
    with StandIn() as standin:
        done = connect(vera, standin, "opencode")
        assert_refused(done, repo, standin, scopes.MERGING_USER_SERVER)
        (repo / "opencode.json").write_text(json.dumps({"mcp": {"vera": {
            "type": "remote", "url": standin.mcp_url, "enabled": True}}}))
        merged = opencode_mcp(runtime_bin, repo, home_env)
    assert merged["url"] == standin.mcp_url and "X-Team" in merged["headers"]


def test_opencode_managed_server_is_a_conflict(tmp_path, repo, vera, home_env,
                                               runtime_bin) -> None:
    managed = tmp_path / "managed"  # OpenCode's own variable moves its managed folder
    managed.mkdir()
    (managed / "opencode.json").write_text(json.dumps({"mcp": {"vera": {
        "type": "remote", "url": ELSEWHERE}}}))
    env = {"OPENCODE_TEST_MANAGED_CONFIG_DIR": str(managed)}
    with StandIn() as standin:
        done = vera("connect", "opencode", "--api-url", standin.url, "--mcp-url",
                    standin.mcp_url, "--yes", env=env)
        assert_refused(done, repo, standin, scopes.SHADOWING_MANAGED_SERVER)
        (repo / "opencode.json").write_text(json.dumps({"mcp": {"vera": {
            "type": "remote", "url": standin.mcp_url, "enabled": True}}}))
        merged = opencode_mcp(runtime_bin, repo, {**home_env, **env})
    assert merged["url"] == ELSEWHERE


@pytest.mark.parametrize(("name", "content", "code"), [
    ("managed-settings.json", {"deniedMcpServers": [{"serverName": "vera"}]},
     scopes.MANAGED_BLOCKS_SERVER),
    ("managed-settings.json", {"allowManagedMcpServersOnly": True},
     scopes.MANAGED_BLOCKS_SERVER),
    ("managed-mcp.json", {"mcpServers": {}}, scopes.MANAGED_BLOCKS_SERVER),
    ("managed-mcp.json", {"mcpServers": {"vera": {"type": "http", "url": ELSEWHERE}}},
     scopes.SHADOWING_MANAGED_SERVER),
])
def test_claude_managed_policy_or_server_is_a_conflict(repo, home_env, managed_etc, name,
                                                      content, code) -> None:
    (managed_etc / "claude-code" / name).write_text(json.dumps(content))
    with StandIn() as standin:
        done = connect_under(managed_etc, repo, home_env, standin, "claude-code")
        assert_refused(done, repo, standin, code)


def test_claude_managed_hooks_policy_is_a_warning(repo, home_env, managed_etc) -> None:
    (managed_etc / "claude-code" / "managed-settings.json").write_text(
        json.dumps({"allowManagedHooksOnly": True}))
    with StandIn() as standin:
        done = connect_under(managed_etc, repo, home_env, standin, "claude-code")
    assert done.returncode == 0, done.stderr
    assert codes(done.stderr, "warning") == [scopes.MANAGED_BLOCKS_HOOKS]
    assert (repo / ".mcp.json").exists()


@pytest.mark.parametrize(("name", "content", "code"), [
    ("managed_config.toml", f'[mcp_servers.vera]\nurl = "{ELSEWHERE}"\n',
     scopes.SHADOWING_MANAGED_SERVER),
    ("config.toml", f'[mcp_servers.vera]\nurl = "{ELSEWHERE}"\nenabled = false\n',
     scopes.MERGING_USER_SERVER),
    ("requirements.toml", '[mcp_servers.another.identity]\nurl = "https://elsewhere.test"\n',
     scopes.MANAGED_BLOCKS_SERVER),
])
def test_codex_managed_or_system_server_is_a_conflict(repo, home_env, managed_etc, name,
                                                     content, code) -> None:
    (managed_etc / "codex").mkdir(exist_ok=True)
    (managed_etc / "codex" / name).write_text(content)
    with StandIn() as standin:
        done = connect_under(managed_etc, repo, home_env, standin, "codex")
        assert_refused(done, repo, standin, code)


def test_codex_managed_hooks_policy_is_a_warning(repo, home_env, managed_etc) -> None:
    (managed_etc / "codex").mkdir(exist_ok=True)
    (managed_etc / "codex" / "requirements.toml").write_text("allow_managed_hooks_only = true\n")
    with StandIn() as standin:
        done = connect_under(managed_etc, repo, home_env, standin, "codex")
    assert done.returncode == 0, done.stderr
    assert codes(done.stderr, "warning") == [scopes.MANAGED_BLOCKS_HOOKS]


def test_user_scope_server_the_project_replaces_is_a_warning(repo, vera, home_env,
                                                             runtime_bin) -> None:
    """A user-scope vera with only keys the project's server sets (its url) is replaced by
    it, in Codex and OpenCode alike: connect goes on and says so."""
    (Path(home_env["CODEX_HOME"]) / "config.toml").write_text(
        f'[mcp_servers.vera]\nurl = "{ELSEWHERE}"\n')
    folder = Path(home_env["XDG_CONFIG_HOME"]) / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(json.dumps({"mcp": {"vera": {
        "type": "remote", "url": ELSEWHERE, "enabled": True}}}))
    with StandIn() as standin:
        for runtime in ("codex", "opencode"):
            done = connect(vera, standin, runtime)
            assert done.returncode == 0, done.stderr
            assert codes(done.stderr, "warning") == [scopes.OVERRIDDEN_USER_SERVER]
        assert opencode_mcp(runtime_bin, repo, home_env)["url"] == standin.mcp_url
    cli.trust_codex_project(repo, home_env)
    assert cli.codex_get(runtime_bin, repo, home_env)["transport"]["url"] == standin.mcp_url


def test_doctor_names_a_vera_server_added_in_another_scope_later(repo, vera, home_env) -> None:
    with StandIn() as standin:
        assert connect(vera, standin, "claude-code").returncode == 0
        before = vera("doctor", "claude-code")
        state = Path(home_env["HOME"]) / ".claude.json"
        state.write_text(json.dumps({"projects": {str(repo): {"mcpServers": {
            "vera": {"type": "http", "url": ELSEWHERE}}}}}))
        after = vera("doctor", "claude-code")
    assert "ok   vera server scopes:" in before.stdout
    assert after.returncode == 1
    assert f"TODO vera server scopes: {scopes.SHADOWING_LOCAL_SERVER}:" in after.stdout
