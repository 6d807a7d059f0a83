"""asyncpg pools scoped to one service's schema."""

from __future__ import annotations

import json

import asyncpg

from vera.config import ConfigError, Settings
from vera.db.migrate import migrate


async def _init_connection(conn: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )


async def create_pool(
    dsn: str, schema: str, *, min_size: int = 1, max_size: int = 8
) -> asyncpg.Pool:
    """A pool whose connections see only ``schema`` (and pg_catalog) by default."""
    return await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        server_settings={"search_path": schema, "application_name": f"vera-{schema}"},
    )


async def open_service_database(settings: Settings, schema: str, package: str) -> asyncpg.Pool:
    """What every service does first: apply its migrations, then pool its schema."""
    if settings.database.dsn is None:
        raise ConfigError("VERA_DATABASE__DSN: required")
    dsn = settings.database.dsn.get_secret_value()
    await migrate(dsn, schema, package)
    return await create_pool(
        dsn,
        schema,
        min_size=settings.database.pool_min_size,
        max_size=settings.database.pool_max_size,
    )
