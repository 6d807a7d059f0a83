"""asyncpg pools scoped to one service's schema."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from vera.config import ConfigError, Settings
from vera.db.migrate import migrate

# What a statement raises when PostgreSQL cancels it (statement_timeout) or the client
# stops waiting for it (command_timeout).
STATEMENT_TIMEOUTS: tuple[type[Exception], ...] = (asyncpg.QueryCanceledError, TimeoutError)
# What a statement raises when PostgreSQL cannot be reached: the server is down (asyncpg
# raises the socket's OSError), refusing connections while it starts or recovers, or the
# connection broke under the statement (a crash, an immediate shutdown, a terminated
# backend). Checked after STATEMENT_TIMEOUTS: TimeoutError is an OSError too.
_UNREACHABLE: tuple[type[Exception], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
)


def _from_the_driver(exc: BaseException) -> bool:
    """Whether ``exc`` passed through asyncpg: a socket error is the database's only then
    (a refused Qdrant connection or a full disk is not)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith("asyncpg"):
            return True
        tb = tb.tb_next
    return False


def database_unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc`` comes from PostgreSQL being out of reach: one of the errors above,
    or what it caused (leaving a transaction block on the broken connection raises an
    InterfaceError whose context is the loss)."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:  # a chain may loop back on itself
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return any(
        isinstance(link, _UNREACHABLE) or (isinstance(link, OSError) and _from_the_driver(link))
        for link in chain
    )


# PostgreSQL probes an idle client this often and drops one that stops answering after
# about 60 s (not the OS default of ~2 h): a client whose host vanished mid-transaction
# would otherwise hold its row locks that long (the next retrieval writer waits on them).
SERVER_KEEPALIVES = {
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


class _BoundedWaitPool(asyncpg.Pool):
    """A pool whose ``acquire`` waits at most ``acquire_timeout`` seconds for a free
    connection unless told otherwise: a call queued behind an exhausted pool ends (its
    ``TimeoutError`` answers UNAVAILABLE ``timeout``, ``vera.rpc.server``) instead of
    waiting past its caller's deadline while holding the caller's resources."""

    def __init__(self, *args: Any, acquire_timeout: float | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._acquire_timeout = acquire_timeout

    def acquire(self, *, timeout: float | None = None) -> Any:
        return super().acquire(timeout=timeout if timeout is not None else self._acquire_timeout)


async def create_pool(
    dsn: str,
    schema: str,
    *,
    min_size: int = 1,
    max_size: int = 8,
    statement_timeout_seconds: float | None = None,
    command_timeout_seconds: float | None = None,
    acquire_timeout_seconds: float | None = None,
) -> asyncpg.Pool:
    """A pool whose connections see only ``schema`` (and pg_catalog) by default; with
    timeouts, PostgreSQL cancels longer statements and the client stops waiting."""
    server_settings = {
        "search_path": schema,
        "application_name": f"vera-{schema}",
        **SERVER_KEEPALIVES,
    }
    if statement_timeout_seconds is not None:
        server_settings["statement_timeout"] = str(int(statement_timeout_seconds * 1000))
    return await _BoundedWaitPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        connect=None,
        setup=None,
        init=_init_connection,
        reset=None,
        loop=None,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        acquire_timeout=acquire_timeout_seconds,
        command_timeout=command_timeout_seconds,
        server_settings=server_settings,
    )


def service_dsn(settings: Settings) -> str:
    """The database a service runs on; a start without one fails naming the variable."""
    if settings.database.dsn is None:
        raise ConfigError("VERA_DATABASE__DSN: required")
    return settings.database.dsn.get_secret_value()


async def open_service_database(settings: Settings, schema: str, package: str) -> asyncpg.Pool:
    """What every service does first: apply its migrations, then pool its schema."""
    db = settings.database
    dsn = service_dsn(settings)
    await migrate(dsn, schema, package)
    return await create_pool(
        dsn,
        schema,
        min_size=db.pool_min_size,
        max_size=db.pool_max_size,
        statement_timeout_seconds=db.statement_timeout_seconds,
        command_timeout_seconds=db.command_timeout_seconds,
        acquire_timeout_seconds=db.acquire_timeout_seconds,
    )
