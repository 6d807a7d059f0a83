"""Versioned SQL migrations, one folder and one schema per service.

Files are ``NNNN_description.sql``, applied in order, each in its own transaction,
recorded in ``<schema>.schema_migrations``. An advisory lock serializes concurrent
migrators (two replicas starting at once).
"""

from __future__ import annotations

import hashlib
import logging
from importlib import resources

import asyncpg

log = logging.getLogger(__name__)


def migration_files(package: str) -> list[tuple[str, str]]:
    """(version, sql) pairs from the ``migrations`` folder of a package, in order."""
    folder = resources.files(package) / "migrations"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]


async def migrate(dsn: str, schema: str, package: str) -> list[str]:
    """Applies the package's pending migrations to ``schema``; returns the versions applied."""
    lock_id = int.from_bytes(hashlib.sha256(schema.encode()).digest()[:8], "big", signed=True)
    conn = await asyncpg.connect(dsn)
    applied: list[str] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", lock_id)
        try:
            # Only when missing: CREATE SCHEMA needs CREATE on the database even with IF
            # NOT EXISTS, which a service's own role, given its schema, does not have.
            if not await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema):
                await conn.execute(f'CREATE SCHEMA "{schema}"')
            await conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{schema}".schema_migrations ('
                " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {
                row["version"]
                for row in await conn.fetch(f'SELECT version FROM "{schema}".schema_migrations')
            }
            for version, sql in migration_files(package):
                if version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(f'SET LOCAL search_path TO "{schema}", public')
                    await conn.execute(sql)
                    await conn.execute(
                        f'INSERT INTO "{schema}".schema_migrations (version) VALUES ($1)', version
                    )
                log.info("applied migration %s.%s", schema, version)
                applied.append(version)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", lock_id)
    finally:
        await conn.close()
    return applied
