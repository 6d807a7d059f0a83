"""Service pools bound every statement: PostgreSQL cancels one that runs past
statement_timeout, the client stops waiting after command_timeout, and the caller of
the service gets UNAVAILABLE instead of a hung call."""

from __future__ import annotations

import asyncpg
import pytest

from vera.config import DatabaseSettings, RpcSettings, Settings
from vera.db.pool import create_pool, database_unreachable, open_service_database
from vera.errors import Unavailable
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server


def test_the_statement_timeout_ends_before_the_longest_deadline() -> None:
    db, rpc = DatabaseSettings(), RpcSettings()
    assert db.statement_timeout_seconds < db.command_timeout_seconds
    assert db.command_timeout_seconds < rpc.longest_deadline_seconds
    assert db.acquire_timeout_seconds < rpc.deadline_seconds


async def test_service_pools_carry_both_timeouts(pg_dsn) -> None:
    settings = Settings(database={"dsn": pg_dsn, "statement_timeout_seconds": 1.5,
                                  "command_timeout_seconds": 0.3})
    pool = await open_service_database(settings, "identity", "vera.services.identity")
    try:
        assert await pool.fetchval("SHOW statement_timeout") == "1500ms"
        with pytest.raises(TimeoutError):  # the client gave up before the server did
            await pool.execute("SELECT pg_sleep(1)")
    finally:
        await pool.close()


async def test_waiting_for_a_pooled_connection_ends(pg_dsn) -> None:
    """Every ``pool.acquire()`` of a service pool, none of which names a timeout, gives up
    after the configured wait when every connection is taken."""
    settings = Settings(database={"dsn": pg_dsn, "pool_min_size": 1, "pool_max_size": 1,
                                  "acquire_timeout_seconds": 0.2})
    pool = await open_service_database(settings, "identity", "vera.services.identity")
    try:
        async with pool.acquire():
            with pytest.raises(TimeoutError):
                async with pool.acquire():
                    pass
        async with pool.acquire() as conn:  # released: the next waiter is served
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await pool.close()


async def test_postgres_cancels_a_statement_past_its_timeout(pg_dsn) -> None:
    pool = await create_pool(pg_dsn, "public", statement_timeout_seconds=0.2)
    try:
        with pytest.raises(asyncpg.QueryCanceledError) as caught:
            await pool.execute("SELECT pg_sleep(10)")
    finally:
        await pool.close()
    # 57014 is query_canceled: the 10 s sleep was cut short, not waited out.
    assert caught.value.sqlstate == "57014"


async def test_the_client_stops_waiting_after_the_command_timeout(pg_dsn) -> None:
    pool = await create_pool(pg_dsn, "public", command_timeout_seconds=0.3)
    try:
        # A client that waited the 10 s sleep out would get its result, not TimeoutError.
        with pytest.raises(TimeoutError):
            await pool.execute("SELECT pg_sleep(10)")
    finally:
        await pool.close()


class Sleeper(identity_pb2_grpc.IdentityServiceServicer):
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def GetPrincipal(self, request, context):
        await self._pool.execute("SELECT pg_sleep(10)")
        return identity_pb2.GetPrincipalResponse()


@pytest.mark.parametrize("timeouts", [
    {"statement_timeout_seconds": 0.2},
    {"statement_timeout_seconds": 20, "command_timeout_seconds": 0.3},
])
async def test_a_caller_gets_unavailable_when_a_statement_times_out(pg_dsn, timeouts) -> None:
    pool = await create_pool(pg_dsn, "public", **timeouts)
    running = create_server([ServiceBinding(
        "vera.identity.v1.IdentityService", Sleeper(pool),
        identity_pb2_grpc.add_IdentityServiceServicer_to_server)], "127.0.0.1:0")
    await running.server.start()
    channel = open_channel(f"127.0.0.1:{running.port}", 8)
    try:
        with pytest.raises(Unavailable) as caught:
            await identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
                identity_pb2.GetPrincipalRequest())
    finally:
        await channel.close()
        await running.stop(0)
        await pool.close()
    assert caught.value.metadata == {"reason": "timeout"}


class Unreachable(identity_pb2_grpc.IdentityServiceServicer):
    """A handler whose database is gone: never started, or its backend killed mid-call."""

    def __init__(self, pg_dsn: str, how: str) -> None:
        self._dsn = pg_dsn
        self._how = how

    async def GetPrincipal(self, request, context):
        if self._how == "down":
            await asyncpg.connect("postgresql://vera@/vera?host=/nonexistent-socket-dir")
        conn = await asyncpg.connect(self._dsn)
        try:
            if self._how == "lost_in_a_transaction":
                # Leaving the block on the dead connection raises InterfaceError.
                async with conn.transaction():
                    await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        finally:
            await conn.close()
        return identity_pb2.GetPrincipalResponse()


@pytest.mark.parametrize("how", ["down", "connection_lost", "lost_in_a_transaction"])
async def test_a_caller_gets_unavailable_when_the_database_is_unreachable(pg_dsn, how) -> None:
    running = create_server([ServiceBinding(
        "vera.identity.v1.IdentityService", Unreachable(pg_dsn, how),
        identity_pb2_grpc.add_IdentityServiceServicer_to_server)], "127.0.0.1:0")
    await running.server.start()
    channel = open_channel(f"127.0.0.1:{running.port}", 8)
    try:
        with pytest.raises(Unavailable) as caught:
            await identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
                identity_pb2.GetPrincipalRequest())
    finally:
        await channel.close()
        await running.stop(0)
    assert caught.value.metadata == {"reason": "database_unreachable"}


def test_a_socket_error_outside_the_database_driver_is_not_the_database() -> None:
    # A refused Qdrant connection or a full disk is a bug or another outage, not
    # database_unreachable (which callers retry and the interceptor logs without a stack).
    def refused() -> None:
        raise ConnectionRefusedError("qdrant")

    try:
        try:
            refused()
        except ConnectionRefusedError as exc:
            raise RuntimeError("vector search failed") from exc
    except RuntimeError as outer:
        assert not database_unreachable(outer)
    assert database_unreachable(asyncpg.CannotConnectNowError("starting up"))


async def test_pool_connections_ask_the_server_to_probe_them(pg_dsn) -> None:
    # A client whose host vanished mid-transaction is dropped after ~60 s, not the OS's
    # ~2 h, so its row locks do not hold up the next writer that long.
    pool = await create_pool(pg_dsn, "public")
    try:
        rows = await pool.fetch(
            "SELECT name, source, reset_val FROM pg_settings WHERE name LIKE 'tcp_keepalives_%'"
        )
    finally:
        await pool.close()
    # Over the tests' Unix socket PostgreSQL shows 0 in effect; what the session asked for
    # is its reset value, set by the client.
    assert {r["name"]: (r["source"], r["reset_val"]) for r in rows} == {
        "tcp_keepalives_idle": ("client", "30"),
        "tcp_keepalives_interval": ("client", "10"),
        "tcp_keepalives_count": ("client", "3"),
    }
