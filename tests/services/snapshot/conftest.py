"""The snapshot service on a fresh database with a controllable clock, over real gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from vera.config import Settings
from vera.db.pool import create_pool
from vera.rpc.client import open_channel
from vera.services.snapshot import server
from vera.snapshot.v1 import snapshot_pb2_grpc


@dataclass
class FakeClock:
    current: datetime = field(default_factory=lambda: datetime(2030, 1, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


@dataclass
class Snapshot:
    stub: snapshot_pb2_grpc.SnapshotServiceStub
    clock: FakeClock
    pool: asyncpg.Pool  # for asserting on rows and driving the sweep directly


async def start(dsn: str, sweep_interval_seconds: float, **snapshot) -> AsyncIterator[Snapshot]:
    clock = FakeClock()
    settings = Settings(
        database={"dsn": dsn},
        snapshot={
            "pack_ttl_days": 30,
            "sweep_interval_seconds": sweep_interval_seconds,
            **snapshot,
        },
    )
    hosted = await server.create(settings, "127.0.0.1:0", clock=clock)
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", deadline_seconds=10)
    pool = await create_pool(dsn, server.SCHEMA, min_size=1, max_size=2)
    try:
        yield Snapshot(snapshot_pb2_grpc.SnapshotServiceStub(channel), clock, pool)
    finally:
        await pool.close()
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()


@pytest.fixture
async def snapshot(pg_dsn: str) -> AsyncIterator[Snapshot]:
    # The background sweeper stays out of the way; tests sweep explicitly.
    async for harness in start(pg_dsn, sweep_interval_seconds=3600):
        yield harness


@pytest.fixture
async def fast_sweeping_snapshot(pg_dsn: str) -> AsyncIterator[Snapshot]:
    async for harness in start(pg_dsn, sweep_interval_seconds=0.02):
        yield harness


@pytest.fixture
def snapshot_with(pg_dsn: str):
    """The service with other snapshot settings: ``async for s in snapshot_with(**settings)``."""

    def started(**snapshot) -> AsyncIterator[Snapshot]:
        return start(pg_dsn, sweep_interval_seconds=3600, **snapshot)

    return started
