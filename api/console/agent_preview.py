"""What an agent would be served: the console asks the MCP server's knowledge_get_context
for one project, through the official MCP client, as the signed-in curator.

The answer is the gateway's own (the same guard, scope resolution, quota and rendering an
agent meets), not a re-creation of it here. The call carries a read-only MCP token minted
for the curator from the credential the session signed in with (so it stops with that key)
that expires after one use's time; deployments that do not issue built-in tokens cannot
preview (``unavailable``).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.api.auth import RestCaller
from vera.api.identity import mint_mcp_token
from vera.config import Settings
from vera.errors import InvalidInput, Unavailable

PREVIEW_TOKEN_SECONDS = 60
MAX_TASK = 2000


def mcp_url(settings: Settings) -> str:
    return settings.api.console_mcp_url or f"http://127.0.0.1:{settings.mcp.port}/mcp"


@dataclass(frozen=True)
class ServedContext:
    text: str  # the tool result's text, as an agent reads it
    error_code: str | None  # the error an agent would get instead (data.code), if any


async def served_context(
    settings: Settings, caller: RestCaller, project_id: str, task: str
) -> ServedContext:
    """knowledge_get_context's answer for ``task`` in the project."""
    task = task.strip()
    if not task or len(task) > MAX_TASK:
        raise InvalidInput("task", reason="malformed")
    minted = mint_mcp_token(settings, caller.principal_id, [settings.mcp.scope_read],
                            key_id=caller.key_id, lifetime_seconds=PREVIEW_TOKEN_SECONDS)
    headers = {"authorization": f"Bearer {minted.token}"}
    budget = settings.mcp.request_budget_seconds + 5
    http = create_mcp_http_client(headers=headers, timeout=httpx2.Timeout(budget))
    try:
        async with Client(streamable_http_client(mcp_url(settings), http_client=http)) as agent:
            result = await agent.call_tool(
                "knowledge_get_context", {"query": task, "project": project_id})
    except MCPError as error:
        data = error.error.data if isinstance(error.error.data, dict) else {}
        return ServedContext("", str(data.get("code", "internal_error")))
    except (httpx2.HTTPError, OSError, ExceptionGroup):
        raise Unavailable() from None
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return ServedContext(text, None)
