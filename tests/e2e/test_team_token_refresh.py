"""On the authenticated stack (`vera up` with auth settings, MCP tokens lasting the shortest
allowed time): after `vera connect`, the token ends and the runtime's own credential path
(Claude Code's headersHelper command as `.mcp.json` names it, run through the shell in the
repository as Claude Code runs it) yields a new token the gateway accepts; revoking the
connection's API key is then refused as `key_revoked`, which doctor reports with
`vera connect` as the fix."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import jwt
import pytest
import test_runtime_handshake as handshake
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from team import bearer

from vera.integrations.ownership import credential_files
from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e
runtime_bin = handshake.runtime_bin
TTL_SECONDS = 60  # the shortest VERA_MCP__TOKEN_TTL_SECONDS allows


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("short-lived-tokens") / "data"
    env = launch_env(data_dir, VERA_API__OPEN_REGISTRATION="true",
                     VERA_MCP__JWT_SECRET=AUTH_SECRET, VERA_MCP__AUTH_ISSUER=AUTH_ISSUER,
                     VERA_MCP__AUTH_AUDIENCE=AUTH_AUDIENCE,
                     VERA_MCP__TOKEN_TTL_SECONDS=str(TTL_SECONDS),
                     VERA_MCP__REVOCATION_CACHE_SECONDS="0", VERA_MCP__OAUTH_LEEWAY_SECONDS="0")
    with launch(data_dir, env) as running:
        yield running


def refusal(stack: LaunchedStack, token: str) -> str | None:
    """The gateway's ``data.reason`` for a refused bearer; None when it accepts it."""
    answer = httpx.post(stack.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        headers={**bearer(token),
                                 "Accept": "application/json, text/event-stream"})
    if answer.status_code != 401:
        return None
    return answer.json()["error"]["data"].get("reason")


async def tools(stack: LaunchedStack, headers: dict[str, str]) -> list[str]:
    http = create_mcp_http_client(headers=headers)
    async with Client(streamable_http_client(stack.mcp_url, http_client=http)) as session:
        return [tool.name for tool in (await session.list_tools()).tools]


def test_an_ended_token_is_minted_again_and_a_revoked_key_is_reported(
        short_lived, runtime_bin, tmp_path) -> None:
    repo, env = handshake.project(short_lived, runtime_bin, tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # the installed `vera`
    api_url = f"http://127.0.0.1:{short_lived.env['VERA_API__PORT']}"
    user_key = httpx.post(f"{api_url}/identity/register",
                          json={"display_name": "dev"}).json()["api_key"]
    done = handshake.run_vera(repo, env, "connect", "claude-code", "--api-url", api_url,
                              "--mcp-url", short_lived.mcp_url, "--yes", "--api-key-stdin",
                              stdin=user_key + "\n")
    assert done.returncode == 0, done.stdout + done.stderr
    first = (repo / credential_files("claude-code").token).read_text()
    assert refusal(short_lived, first) is None

    ends = jwt.decode(first, options={"verify_signature": False})["exp"]
    time.sleep(max(0.0, ends - time.time()) + 1)
    assert refusal(short_lived, first) == "token_expired"

    helper = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["vera"]["headersHelper"]
    ran = subprocess.run(["sh", "-c", helper], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    headers = json.loads(ran.stdout)
    renewed = headers["Authorization"].removeprefix("Bearer ")
    assert renewed != first and refusal(short_lived, renewed) is None
    assert anyio.run(tools, short_lived, headers)

    # The connection's own key (the token names it) is revoked: its tokens stop at once.
    key_id = jwt.decode(renewed, options={"verify_signature": False})["vera_key_id"]
    revoked = httpx.delete(f"{api_url}/identity/api-keys/{key_id}", headers=bearer(user_key))
    assert revoked.status_code == 200, revoked.text
    assert refusal(short_lived, renewed) == "key_revoked"
    report = handshake.run_vera(repo, env, "doctor", "claude-code")
    assert report.returncode == 1
    [line] = [ln for ln in report.stdout.splitlines() if "vera tools visible" in ln]
    assert "key_revoked" in line and "vera connect" in line, report.stdout
