"""A developer on a team connects their agent to the team's authenticated VERA with
`vera connect` alone: the token it stores fits the save mode, and the server (not only the
client) holds the mode's line."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import test_runtime_handshake as handshake
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.integrations.ownership import TOKEN_PATH

pytestmark = pytest.mark.e2e
runtime_bin = handshake.runtime_bin
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
