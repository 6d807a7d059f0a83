"""The four real services on one PostgreSQL, the real gateway (built-in JWT, uvicorn on a
loopback port) and the REST API (httpx over ASGI): what the cross-service isolation and
erasure tests drive. Identity is the ``identity_address`` fixture's service."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from harness import serve_mcp, serve_service
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from vera.api.app import build_app as build_api
from vera.config import McpSettings, ObservabilitySettings, ServiceAddresses, Settings
from vera.gateway.app import build_app as build_gateway
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.knowledge import server as knowledge_server
from vera.services.retrieval import server as retrieval_server
from vera.services.snapshot import server as snapshot_server

SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"
ALL_SCOPES = ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"]


@dataclass
class Outcome:
    """One MCP call's result or error, comparable across calls."""

    error_code: int | None
    error_data: Any
    data: Any


@dataclass
class Stack:
    mcp_url: str
    api: httpx.AsyncClient
    identity: identity_pb2_grpc.IdentityServiceStub
    retrieval: retrieval_pb2_grpc.RetrievalServiceStub
    dsn: str
    addresses: ServiceAddresses | None = None

    async def account(self, name: str, *, admin: bool = False) -> dict[str, Any]:
        """A user (the first admin may be created with no actor), its API key, a JWT."""
        user = await self.identity.CreateUser(identity_pb2.CreateUserRequest(
            display_name=name, admin=admin))
        key = await self.identity.CreateApiKey(identity_pb2.CreateApiKeyRequest(
            principal_id=user.principal.principal_id, label="test"))
        token = (await self.api.post("/identity/mcp-token", headers=bearer(key.api_key),
                                     json={"scopes": ALL_SCOPES})).json()["access_token"]
        return {"principal_id": user.principal.principal_id,
                "personal_scope_id": user.principal.personal_scope_id,
                "api_key": key.api_key, "token": token}

    @contextlib.asynccontextmanager
    async def client(self, who: dict[str, Any]) -> AsyncIterator[Client]:
        http = create_mcp_http_client(headers={"authorization": f"Bearer {who['token']}"})
        async with Client(streamable_http_client(self.mcp_url, http_client=http)) as client:
            yield client

    async def call(self, who: dict[str, Any], tool: str, args: dict[str, Any]) -> Outcome:
        async with self.client(who) as client:
            try:
                result = await client.call_tool(tool, args)
            except MCPError as error:
                data = dict(error.error.data or {})
                return Outcome(error.error.code, data, None)
        assert not result.is_error, result.content
        return Outcome(None, None, result.structured_content)

    async def ok(self, who: dict[str, Any], tool: str, args: dict[str, Any]) -> Any:
        outcome = await self.call(who, tool, args)
        assert outcome.error_code is None, outcome
        return outcome.data

    async def wait_indexed(self) -> None:
        """Until retrieval has applied knowledge's whole change log (its head read here)."""
        conn = await asyncpg.connect(self.dsn)
        try:
            head = await conn.fetchval("SELECT coalesce(max(position), 0) FROM knowledge.outbox")
        finally:
            await conn.close()
        for _ in range(2000):
            status = await self.retrieval.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
            if status.indexed_position >= head:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("retrieval did not catch up with the change log")


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def add_member(api: httpx.AsyncClient, owner: dict[str, Any], workspace_id: str,
                     member: dict[str, Any]) -> None:
    """The owner invites, the member accepts: membership needs the member's consent."""
    invited = await api.put(f"/identity/workspaces/{workspace_id}/members/"
                            f"{member['principal_id']}", headers=bearer(owner["api_key"]),
                            json={})
    assert invited.status_code == 202, invited.text
    accepted = await api.post(f"/identity/invitations/{invited.json()['invitation_id']}/accept",
                              headers=bearer(member["api_key"]), json={})
    assert accepted.status_code == 200, accepted.text


def gateway_settings(addresses: ServiceAddresses, tool_profile: str = "advanced") -> Settings:
    return Settings(
        environment="local",
        mcp=McpSettings(port=0, jwt_secret=SECRET, auth_issuer=ISSUER, auth_audience=AUDIENCE,
                        tool_profile=tool_profile,
                        # membership changes mid-test: no 2 s reuse of a resolved project
                        project_cache_seconds=0, quota_enabled=False),
        services=addresses,
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )


@contextlib.asynccontextmanager
async def full_stack(dsn: str, identity_address: str, data_dir: Path, embedder: Any, *,
                     retrieval_settings: dict[str, Any] | None = None,
                     tool_profile: str = "advanced") -> AsyncIterator[Stack]:
    async with contextlib.AsyncExitStack() as exits:
        async def host(module: Any, settings: Settings, **kw: Any) -> str:
            return await exits.enter_async_context(serve_service(module, settings, **kw))

        database = {"dsn": dsn}
        knowledge = await host(knowledge_server, Settings(database=database))
        upstream = ServiceAddresses(knowledge=knowledge)
        retrieval = await host(retrieval_server, Settings(
            database=database, services=upstream, data_dir=data_dir,
            retrieval={"index_poll_seconds": 0.02, **(retrieval_settings or {})}),
            embedder=embedder)
        snapshot = await host(snapshot_server, Settings(database=database, services=upstream))
        addresses = ServiceAddresses(identity=identity_address, knowledge=knowledge,
                                     retrieval=retrieval, snapshot=snapshot)
        mcp_url = await exits.enter_async_context(serve_mcp(build_gateway(
            gateway_settings(addresses, tool_profile))))
        api_app = build_api(Settings(environment="dev", mcp={
            "jwt_secret": SECRET, "auth_issuer": ISSUER, "auth_audience": AUDIENCE},
            services=addresses))
        await exits.enter_async_context(api_app.router.lifespan_context(api_app))
        api = await exits.enter_async_context(httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api_app), base_url="http://127.0.0.1:8081"))
        channels = [open_channel(a, deadline_seconds=10) for a in (identity_address, retrieval)]
        for channel in channels:
            exits.push_async_callback(channel.close)
        yield Stack(mcp_url, api, identity_pb2_grpc.IdentityServiceStub(channels[0]),
                    retrieval_pb2_grpc.RetrievalServiceStub(channels[1]), dsn, addresses)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
