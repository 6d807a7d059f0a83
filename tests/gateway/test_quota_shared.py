"""Quotas hold across gateway replicas: two gateway apps (two uvicorn servers) serving one
principal draw from one budget kept by the real identity service in PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from vera.config import McpSettings, ObservabilitySettings, ServiceAddresses, Settings
from vera.errors import InvalidInput
from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.mcp_tokens import TokenKey, mint
from vera.rpc.client import open_channel
from vera.services.identity import server

SECRET = "built-in-test-secret-0123456789abcdef"
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"


@dataclass
class Clock:
    now: float = 1_700_000_010.0

    def __call__(self) -> float:
        return self.now


@dataclass
class RealIdentity:
    address: str
    stub: identity_pb2_grpc.IdentityServiceStub
    dsn: str


@pytest.fixture
async def real_identity(pg_dsn: str) -> AsyncIterator[RealIdentity]:
    hosted = await server.create(Settings(database={"dsn": pg_dsn}), "127.0.0.1:0")
    await hosted.running.server.start()
    address = f"127.0.0.1:{hosted.running.port}"
    channel = open_channel(address, deadline_seconds=10)
    try:
        yield RealIdentity(address, identity_pb2_grpc.IdentityServiceStub(channel), pg_dsn)
    finally:
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()


async def counters(dsn: str) -> list[tuple[str, int, int]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT key, window_start, count FROM identity.quota_counters"
            " ORDER BY key, window_start"
        )
    finally:
        await conn.close()
    return [(r["key"], r["window_start"], r["count"]) for r in rows]


def replica_settings(identity: str, others: str) -> Settings:
    return Settings(
        environment="prod",
        mcp=McpSettings(
            port=0,
            jwt_secret=SECRET,
            auth_issuer=ISSUER,
            auth_audience=AUDIENCE,
            quota_read_per_minute=3,
        ),
        services=ServiceAddresses(
            identity=identity, knowledge=others, retrieval=others, snapshot=others
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )


def client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


async def search(c: Client) -> MCPError | None:
    try:
        result = await c.call_tool("knowledge_search", {"query": "q"})
    except MCPError as exc:
        return exc
    assert not result.is_error
    return None


async def test_two_replicas_share_one_principals_budget(real_identity, fakes, serve):
    user = await real_identity.stub.CreateUser(pb.CreateUserRequest(display_name="quota"))
    principal = user.principal.principal_id
    key = await real_identity.stub.CreateApiKey(pb.CreateApiKeyRequest(principal_id=principal))
    token = mint(
        TokenKey(SECRET, "HS256", ISSUER, AUDIENCE),
        principal,
        ["memory:read"],
        key_id=key.key.key_id,
        lifetime_seconds=3600,
    ).token
    clock = Clock()
    settings = replica_settings(real_identity.address, fakes.address)
    # No quota_store: the default store is the shared one.
    async with serve(settings, clock=clock) as a, serve(settings, clock=clock) as b:
        async with client(a.url, token) as on_a, client(b.url, token) as on_b:
            assert await search(on_a) is None
            assert await search(on_b) is None
            assert await search(on_a) is None
            for replica in (on_b, on_a, on_b):
                refused = await search(replica)
                assert refused is not None
                assert (refused.code, refused.data["code"], refused.data["bucket"]) == (
                    -32003,
                    "quota_exceeded",
                    "read",
                )
            window = int(clock.now // 60) * 60
            # Refusals counted nothing: the shared count is exactly the limit.
            assert await counters(real_identity.dsn) == [(f"{principal}:read", window, 3)]
            # The next window refills for both replicas, and the old window is dropped.
            clock.now += 60
            assert await search(on_b) is None
            assert await search(on_a) is None
            assert await counters(real_identity.dsn) == [(f"{principal}:read", window + 60, 2)]


async def test_charge_quota_is_atomic_under_concurrency(real_identity):
    request = pb.ChargeQuotaRequest(key="p:read", window_start=1_700_000_000, limit=5)
    answers = await asyncio.gather(*(real_identity.stub.ChargeQuota(request) for _ in range(20)))
    assert sum(answer.allowed for answer in answers) == 5
    assert await counters(real_identity.dsn) == [("p:read", 1_700_000_000, 5)]


async def test_charge_quota_input_is_checked(real_identity):
    for request in (
        pb.ChargeQuotaRequest(key="", window_start=0, limit=1),
        pb.ChargeQuotaRequest(key="k", window_start=-1, limit=1),
        pb.ChargeQuotaRequest(key="k", window_start=0, limit=0),
    ):
        with pytest.raises(InvalidInput):
            await real_identity.stub.ChargeQuota(request)
    assert await counters(real_identity.dsn) == []
