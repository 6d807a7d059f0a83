"""`vera mcp-token`, what each runtime runs for its token: a fresh cached token is answered
without touching the network, one that ends soon is minted again with the key connect
stored for this checkout (a per-connection key, or a local stack's data dir), that key goes
only to the API it was stored for, everything is owner-only outside the repository, and
a VERA that is down gets a non-zero exit with nothing on stdout."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import jwt
import runtime_cli as cli
from standin import API_KEY, CONNECTION_KEY, StandIn

from vera.integrations import credentials
from vera.integrations.ownership import RECORD_PATH, credential_files
from vera.local_secret import FILE_NAME
from vera.stack.run_files import write_stack_file

CLAUDE = credential_files("claude-code")


def token(left: float, life: int = 3600) -> str:
    """A JWT ending ``left`` seconds from now, minted ``life`` seconds before its end."""
    expiry = int(time.time() + left)
    return jwt.encode({"sub": "dev", "iat": expiry - life, "exp": expiry,
                       "scope": "memory:read"}, "k" * 32, algorithm="HS256")


def connect(vera, standin: StandIn, runtime: str = "claude-code", *extra: str,
            stdin: str | None = API_KEY + "\n", env: dict[str, str] | None = None) -> None:
    done = vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes", *(["--api-key-stdin"] if stdin else []), *extra, stdin=stdin, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def state_files(home_env: dict[str, str]) -> list[Path]:
    """What connect stored, found from HOME alone (as Codex runs the helper)."""
    folder = Path(home_env["HOME"]) / ".local" / "state" / "vera" / credentials.FOLDER
    return sorted(folder.iterdir())


def minted(standin: StandIn) -> list[dict]:
    return [r for r in standin.requests if r["path"] == "/identity/mcp-token"]


def test_a_fresh_token_is_answered_without_the_network(repo, vera, home_env):
    fresh = token(3600)
    with StandIn(auth=fresh) as standin:
        connect(vera, standin)
        standin.requests.clear()
        done = vera("mcp-token", "--runtime", "claude-code", "--headers")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"Authorization": f"Bearer {fresh}"}
        assert standin.requests == []


def test_a_token_that_ends_soon_is_minted_again_with_the_connection_key(
        repo, vera, home_env):
    with StandIn(auth=token(3600)) as standin:
        connect(vera, standin)
        # The user's own key made one key for this connection and is not kept.
        [stored] = state_files(home_env)
        assert API_KEY not in stored.read_text()
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        assert stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
        assert not stored.resolve().is_relative_to(repo)
        (repo / CLAUDE.token).write_text(token(30))  # inside the margin
        renewed = standin.minted = standin.auth = token(3600)
        standin.requests.clear()
        done = vera("mcp-token", "--runtime", "claude-code")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == renewed
        [request] = minted(standin)
        assert request["headers"]["Authorization"] == f"Bearer {CONNECTION_KEY}"
        assert (repo / CLAUDE.token).read_text() == renewed
        assert json.loads((repo / CLAUDE.headers).read_text()) == {
            "Authorization": f"Bearer {renewed}"}
        for rel in CLAUDE.paths:
            assert stat.S_IMODE((repo / rel).stat().st_mode) == 0o600, rel
        # Fresh again: the next connection reads it without minting.
        standin.requests.clear()
        assert vera("mcp-token", "--runtime", "claude-code").stdout.strip() == renewed
        assert standin.requests == []


def test_the_stored_key_goes_only_to_the_api_it_was_stored_for(repo, vera, home_env):
    """A tracked record, the runtime's config and the environment all naming another API
    steer nothing: the key goes where connect stored it for."""
    with StandIn(auth=token(3600)) as standin, StandIn() as elsewhere:
        connect(vera, standin)
        for rel in (RECORD_PATH, ".mcp.json"):
            text = (repo / rel).read_text().replace(standin.url, elsewhere.url)
            (repo / rel).write_text(text)
        (repo / CLAUDE.token).write_text(token(-10))
        standin.requests.clear()
        done = vera("mcp-token", "--runtime", "claude-code",
                    env={"VERA_API_URL": elsewhere.url, "VERA_MCP_URL": elsewhere.mcp_url})
        assert done.returncode == 0, done.stderr
        assert elsewhere.requests == []
        assert [r["headers"]["Authorization"] for r in minted(standin)] == [
            f"Bearer {CONNECTION_KEY}"]


def test_vera_down_fails_quietly(repo, vera, home_env):
    with StandIn(auth=token(3600)) as standin:
        connect(vera, standin)
    (repo / CLAUDE.token).write_text(token(-10))
    done = vera("mcp-token", "--runtime", "claude-code", "--headers")
    assert done.returncode != 0
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_still_valid_token_is_answered_when_minting_fails(repo, vera, home_env):
    with StandIn(auth=token(3600)) as standin:
        connect(vera, standin)
    ending = token(30)
    (repo / CLAUDE.token).write_text(ending)
    done = vera("mcp-token", "--runtime", "claude-code")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ending


def test_not_connected_fails_quietly(repo, vera):
    done = vera("mcp-token", "--runtime", "claude-code")
    assert done.returncode != 0 and done.stdout == ""


def test_a_reconnect_mints_with_the_stored_key_and_disconnect_revokes_it(
        repo, vera, home_env):
    with StandIn(auth=token(3600)) as standin:
        connect(vera, standin)
        standin.requests.clear()
        connect(vera, standin, "claude-code", "--save-mode", "off", stdin=None)
        assert [r["headers"]["Authorization"] for r in minted(standin)] == [
            f"Bearer {CONNECTION_KEY}"]
        done = vera("disconnect", "claude-code", "--yes")
        assert done.returncode == 0, done.stderr
        assert CONNECTION_KEY in standin.revoked
        assert state_files(home_env) == []


def local_stack(data_dir: Path, standin: StandIn, secret: str) -> None:
    """A local-dev stack running on ``data_dir`` (this process stands for its supervisor)
    whose API is ``standin``, and the data dir's secret."""
    data_dir.mkdir(parents=True)
    fd = os.open(data_dir / FILE_NAME, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secret)
    write_stack_file(data_dir, {"pid": os.getpid(), "api_url": standin.url,
                                "auth_profile": "local-dev"})


def test_local_mode_mints_with_the_data_dirs_secret_and_never_writes_it(
        repo, vera, home_env, tmp_path):
    data_dir = tmp_path / "data"
    # The stand-in mints for API_KEY: here it is the data dir's secret.
    with StandIn(auth=token(3600)) as standin:
        local_stack(data_dir, standin, API_KEY)
        done = vera("connect", "codex", "--api-url", standin.url, "--mcp-url",
                    standin.mcp_url, "--yes", env={"VERA_DATA_DIR": str(data_dir)})
        assert done.returncode == 0, done.stdout + done.stderr
        assert (repo / credential_files("codex").token).read_text() == standin.auth
        assert [r["headers"]["Authorization"] for r in minted(standin)] == [
            f"Bearer {API_KEY}"]
        written = [p for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts]
        for path in [*written, *state_files(home_env)]:
            assert API_KEY not in path.read_text(), path
        (repo / credential_files("codex").token).write_text(token(-10))
        renewed = standin.minted = standin.auth = token(3600)
        refreshed = vera("mcp-token", "--runtime", "codex")
        assert refreshed.returncode == 0, refreshed.stderr
        assert refreshed.stdout.strip() == renewed
        # The local stack moved: its secret goes nowhere else.
        write_stack_file(data_dir, {"pid": os.getpid(), "api_url": "http://127.0.0.1:9",
                                    "auth_profile": "local-dev"})
        (repo / credential_files("codex").token).write_text(token(-10))
        standin.requests.clear()
        moved = vera("mcp-token", "--runtime", "codex")
        assert moved.returncode != 0 and moved.stdout == ""
        assert standin.requests == []


def test_doctor_says_refresh_is_wired_and_refreshes_like_the_runtime(
        repo, vera, runtime_bin, home_env):
    with StandIn(auth=token(3600)) as standin:
        connect(vera, standin, "opencode")
        (repo / credential_files("opencode").token).write_text(token(-10))
        path = f"{runtime_bin}:{home_env['PATH']}"
        unwired = vera("doctor", "opencode", env={"PATH": path})
        assert "TODO mcp token refresh" in unwired.stdout  # `vera` is not on its PATH
        assert "TODO mcp token expiry" in unwired.stdout
        wired = vera("doctor", "opencode",
                     env={"PATH": f"{Path(sys.executable).parent}:{path}"})
        assert "ok   mcp token refresh" in wired.stdout, wired.stdout
        assert "ok   mcp token expiry" in wired.stdout
        assert "ok   vera tools visible" in wired.stdout


def test_opencodes_plugin_replaces_an_ended_token_before_it_connects(
        repo, vera, runtime_bin, home_env):
    """OpenCode reads `{file:.vera/opencode/mcp-token}` at start; VERA's plugin (its config
    hook) asks `vera mcp-token --runtime opencode` first, so a token that ended while
    OpenCode was closed is not what it sends. Without `vera` on its PATH the stale token
    is sent and refused."""
    with StandIn(auth=token(3600)) as standin:
        connect(vera, standin, "opencode")
        path = f"{runtime_bin}:{home_env['PATH']}"
        for on_path, connected in ((False, False), (True, True)):
            (repo / credential_files("opencode").token).write_text(token(-10))
            env = {**home_env, "PATH": f"{Path(sys.executable).parent}:{path}" if on_path
                   else path}
            listed = cli.opencode_list(runtime_bin, repo, env)
            assert ("✓ vera" in listed) is connected, listed
        assert (repo / credential_files("opencode").token).read_text() == standin.auth
