"""The real runtimes against the real gateway: after `vera connect`, Claude Code's own
handshake (`claude mcp get vera`) reports the local stack Connected and `vera doctor` sees
VERA's tools through it; Codex, connected to an authenticated stack with an API key
exchanged for a token, sees them too, and neither secret is printed. The handshake's
message order is the SDK's, not checked here; OpenCode's sessions are
tests/e2e/test_team_connect.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from vera.integrations.ownership import credential_files

CHECKOUT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runtime_bin() -> Path:
    done = subprocess.run([str(CHECKOUT / "scripts" / "runtimes")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def project(stack, runtime_bin: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh repository and an environment with an empty user home."""
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    env = {**stack.env, "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
           # The installed `vera` too: the runtimes run `vera mcp-token` for their token.
           "PATH": f"{Path(sys.executable).parent}:{runtime_bin}:{stack.env.get('PATH', '')}",
           "DISABLE_AUTOUPDATER": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
           "OPENCODE_DISABLE_MODELS_FETCH": "1"}
    return repo, env


def approve_claude_server(repo: Path, env: dict[str, str]) -> None:
    """The folder trust and server approval a person gives once in Claude Code; doctor
    never gives them."""
    state_file = Path(env["HOME"]) / ".claude.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    state.setdefault("projects", {}).setdefault(str(repo), {})["hasTrustDialogAccepted"] = True
    state_file.write_text(json.dumps(state))
    local = repo / ".claude" / "settings.local.json"
    local.parent.mkdir(exist_ok=True)
    local.write_text(json.dumps({"enabledMcpjsonServers": ["vera"]}))


def run_vera(repo: Path, env: dict[str, str], *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vera.cli", *args], cwd=repo, env=env,
                          input=stdin, capture_output=True, text=True, timeout=180)


def test_local_principal_connects_with_the_runtimes_own_handshake(stack, runtime_bin,
                                                                   tmp_path):
    repo, env = project(stack, runtime_bin, tmp_path)
    api_url = f"http://127.0.0.1:{stack.env['VERA_API__PORT']}"

    def vera(*args: str) -> subprocess.CompletedProcess:
        return run_vera(repo, env, *args)

    done = vera("connect", "claude-code", "--api-url", api_url, "--mcp-url", stack.mcp_url,
                "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "auth profile: local-dev" in done.stdout
    # The local gateway takes a local token, which Claude Code gets from its headersHelper
    # (`vera mcp-token --headers`): it runs that only in a folder the user trusted.
    approve_claude_server(repo, env)  # what the user does once in Claude Code
    health = subprocess.run(
        ["claude", "--settings", '{"enableAllProjectMcpServers":true}', "mcp", "get", "vera"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)
    assert "Connected" in health.stdout, health.stdout + health.stderr
    doctor = vera("doctor", "claude-code")
    assert "ok   claude connects to vera" in doctor.stdout
    tools = next(line for line in doctor.stdout.splitlines() if "vera tools visible" in line)
    assert tools.strip().startswith("ok")


def test_remote_authenticated_api_key_exchange_then_tools_visible(auth_stack, runtime_bin,
                                                                  tmp_path):
    repo, env = project(auth_stack, runtime_bin, tmp_path)
    api_url = f"http://127.0.0.1:{auth_stack.env['VERA_API__PORT']}"
    registered = httpx.post(f"{api_url}/identity/register", json={"display_name": "dev"})
    api_key = registered.json()["api_key"]
    done = run_vera(repo, env, "connect", "codex", "--api-url", api_url, "--mcp-url",
                    auth_stack.mcp_url, "--yes", "--api-key-stdin", stdin=api_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "auth profile: remote-authenticated" in done.stdout
    token = (repo / credential_files("codex").token).read_text()
    assert token not in done.stdout and api_key not in done.stdout
    assert token not in (repo / ".codex/config.toml").read_text()
    doctor = run_vera(repo, {**env, "VERA_MCP_TOKEN": token}, "doctor", "codex")
    tools = next(line for line in doctor.stdout.splitlines() if "vera tools visible" in line)
    assert tools.strip().startswith("ok"), doctor.stdout
    assert "TODO codex project trust" in doctor.stdout  # named, not taken
