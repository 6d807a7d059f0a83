"""Shared fixtures: one embedded PostgreSQL per test session, a fresh database per use."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from vera.db.embedded import EmbeddedPostgres


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    with tempfile.TemporaryDirectory(prefix="vera-test-pg-") as tmp:
        pg = EmbeddedPostgres(Path(tmp))
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()


@pytest.fixture
async def pg_dsn(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    """A DSN to a brand-new empty database, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(embedded_pg.admin_dsn())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield embedded_pg.dsn(name)
    admin = await asyncpg.connect(embedded_pg.admin_dsn())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
