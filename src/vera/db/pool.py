"""asyncpg pools scoped to one service's schema."""

from __future__ import annotations

import json

import asyncpg


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
