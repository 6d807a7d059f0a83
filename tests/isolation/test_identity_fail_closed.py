"""Identity unavailable, through the real services, the real gateway and the official MCP
client: with the real identity service stopped (past the gateway's credential cache), every
tool call of an open session fails closed, promptly and writing nothing, with the
structured error the GUIDE allows (``internal_error``; its ``data.reason`` ``unavailable``
tells a retryable outage apart from a bug)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from harness import serve_service, without_ids
from isolation_stack import full_stack
from mcp.shared.exceptions import MCPError

from vera.config import Settings
from vera.services.identity import server as identity_server

# data.code stays one of the GUIDE's nine; data.reason says the outage is worth a retry.
UNAVAILABLE = (-32603, {"code": "internal_error", "reason": "unavailable"})
QUERY = "which cluster does ledger-api deploy to"
# Well inside the request budget: a refused backend must answer at once, never hang.
PROMPT_SECONDS = 15.0


@contextlib.asynccontextmanager
async def stoppable_identity(dsn: str) -> AsyncIterator[tuple[str, Any]]:
    """A real identity service; yields its address and a coroutine function that stops it."""
    cm = serve_service(identity_server, Settings(database={"dsn": dsn}))
    address = await cm.__aenter__()
    stopped = False

    async def stop() -> None:
        nonlocal stopped
        stopped = True
        await cm.__aexit__(None, None, None)

    try:
        yield address, stop
    finally:
        if not stopped:
            await cm.__aexit__(None, None, None)


async def test_identity_unavailable_fails_every_tool_closed(pg_dsn, tmp_path, embedder) -> None:
    async with (
        stoppable_identity(pg_dsn) as (identity, stop_identity),
        full_stack(pg_dsn, identity, tmp_path / "data", embedder) as stack,
    ):
        alice = await stack.account("alice")
        await stack.ok(
            alice,
            "knowledge_propose",
            {
                "subject": "ledger-api",
                "predicate": "deploys_to",
                "object": "eu-west cluster",
                "task_ref": "t-identity",
            },
        )
        pack = await stack.ok(alice, "knowledge_get_context", {"query": QUERY, "persist": True})
        async with stack.client(alice) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            await stop_identity()
            # The gateway keeps a credential it checked for VERA_MCP__REVOCATION_CACHE_SECONDS
            # (gateway/credentials.py): fail-closed holds from when that answer runs out.
            await asyncio.sleep(Settings().mcp.revocation_cache_seconds + 1)
            assert len(tools) >= 20
            # Valid arguments for the main tools, and none at all for every tool: the
            # caller's principal is looked up before anything else, and cannot be.
            calls: list[tuple[str, dict[str, Any]]] = [
                ("knowledge_get_context", {"query": QUERY}),
                ("knowledge_search", {"query": QUERY}),
                ("knowledge_get_context_pack", {"pack_id": pack["pack_id"]}),
                (
                    "knowledge_propose",
                    {
                        "subject": "ledger-api",
                        "predicate": "deploys_to",
                        "object": "eu-north cluster",
                        "task_ref": "t-identity",
                    },
                ),
                (
                    "knowledge_feedback",
                    {
                        "context_pack_id": pack["pack_id"],
                        "result_ref": pack["pack_id"],
                        "signal": "up",
                    },
                ),
                *((name, {}) for name in tools),
            ]
            for name, arguments in calls:
                async with asyncio.timeout(PROMPT_SECONDS):
                    with pytest.raises(MCPError) as raised:
                        await client.call_tool(name, arguments)
                error = raised.value.error
                assert (error.code, without_ids(error.data)) == UNAVAILABLE, name

    conn = await asyncpg.connect(pg_dsn)
    try:
        # Nothing was written while identity was down: one proposal, one feedback-free pack.
        assert await conn.fetchval("SELECT count(*) FROM knowledge.proposal_attempts") == 1
        assert await conn.fetchval("SELECT count(*) FROM knowledge.retrieval_feedback") == 0
    finally:
        await conn.close()
