"""The identity service on a fresh database, driven through the real gRPC client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from vera.config import Settings
from vera.db.pool import create_pool
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.identity import server
from vera.services.identity.account_store import PgAccountStore


@dataclass
class Identity:
    stub: identity_pb2_grpc.IdentityServiceStub
    store: PgAccountStore  # sets up workspaces directly, without the invitation flow


@pytest.fixture
async def identity(pg_dsn: str) -> AsyncIterator[Identity]:
    hosted = await server.create(Settings(database={"dsn": pg_dsn}), "127.0.0.1:0")
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", deadline_seconds=10)
    pool = await create_pool(pg_dsn, server.SCHEMA, min_size=1, max_size=2)
    try:
        yield Identity(identity_pb2_grpc.IdentityServiceStub(channel), PgAccountStore(pool))
    finally:
        await pool.close()
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()
