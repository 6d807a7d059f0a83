"""Runs `vera up` as a user does, as a subprocess on free ports, and waits until it
serves: the one launcher of the end-to-end tests and the benchmarks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.config import McpSettings
from vera.local_secret import read_secret
from vera.stack import StackError
from vera.stack.ports import free_port
from vera.stack.run_files import stack_file

READY_TIMEOUT_SECONDS = 180.0
# What a local runtime connected with `vera connect` may do: every class, by the names the
# settings give them (the one home of those names).
_SCOPES = McpSettings()
EVERY_SCOPE = (_SCOPES.scope_read, _SCOPES.scope_propose, _SCOPES.scope_feedback,
               _SCOPES.scope_snapshot)
LAUNCH_STOP_TIMEOUT_SECONDS = 60.0


@contextlib.asynccontextmanager
async def _bearer_transport(
    url: str, token: str, headers: dict[str, str]
) -> AsyncIterator[Any]:
    sent = {**headers, "authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=sent) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def bearer_mcp_client(
    url: str, token: str, *, headers: dict[str, str] | None = None, **options: Any
) -> Client:
    """The official MCP client over HTTP, presenting ``token`` (and ``headers``) on every
    request."""
    return Client(_bearer_transport(url, token, headers or {}), **options)


def launch_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """The environment `vera up` runs on ``data_dir`` with: this process's, without a
    database DSN (the stack runs its own PostgreSQL), free ports for the REST API and the
    metrics listener, and ``settings`` (``VERA_*`` names) on top."""
    env = {
        **os.environ,
        "VERA_DATA_DIR": str(data_dir),
        "VERA_OBSERVABILITY__MCP_METRICS_PORT": str(free_port()),
        "VERA_API__PORT": str(free_port()),
        **settings,
    }
    env.pop("VERA_DATABASE__DSN", None)
    return env


@dataclass
class LaunchedStack:
    """`vera up` on ``data_dir`` as a child process, its output appended to ``log_path``."""

    data_dir: Path
    port: int
    env: dict[str, str]
    log_path: Path
    cwd: Path | None = None
    ready_timeout: float = READY_TIMEOUT_SECONDS
    # More of `vera up`'s options (--allow-profile-change).
    up_args: tuple[str, ...] = ()
    process: subprocess.Popen | None = None
    _tokens: dict[tuple[str, ...], str] = field(default_factory=dict)

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.env['VERA_API__PORT']}"

    def mcp_token(self, scopes: tuple[str, ...] = EVERY_SCOPE) -> str:
        """A local MCP token, minted as a local client gets one: by the stack's REST API,
        for the data dir's secret (the local-dev gateway refuses a call without one). Minted
        once per scope set and kept: timed calls pay no minting, and a test that stops the
        REST API still has it."""
        if scopes in self._tokens:
            return self._tokens[scopes]
        secret = read_secret(self.data_dir)
        if secret is None:
            raise StackError(f"{self.data_dir} has no secret: is it a local-dev data dir?")
        answer = httpx.post(f"{self.api_url}/identity/mcp-token", json={"scopes": list(scopes)},
                            headers={"authorization": f"Bearer {secret}"}, timeout=30)
        answer.raise_for_status()
        self._tokens[scopes] = answer.json()["token"]
        return self._tokens[scopes]

    def mcp_client(self, **options: Any) -> Client:
        """An MCP client on this local-dev stack's gateway, with its local token."""
        return bearer_mcp_client(self.mcp_url, self.mcp_token(), **options)

    def start(self) -> None:
        """Starts `vera up` and returns once it wrote ``stack.json`` and the gateway answers
        ``/healthz``; StackError when it exits or is not ready in time."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "vera.cli",
                    "up",
                    "--data-dir",
                    str(self.data_dir),
                    "--port",
                    str(self.port),
                    *self.up_args,
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
            )
        give_up = time.monotonic() + self.ready_timeout
        while time.monotonic() < give_up:
            if self.process.poll() is not None:
                raise StackError(
                    f"vera up exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            if stack_file(self.data_dir).exists():
                try:
                    health = httpx.get(f"http://127.0.0.1:{self.port}/healthz")
                    if health.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
            time.sleep(0.3)
        raise StackError(f"the stack did not become ready:\n{self.log_tail()}")

    def stop(self) -> int:
        """SIGTERM, as a user's Ctrl-C; killed when it outlasts the timeout. Its exit code."""
        process, self.process = self.process, None
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=LAUNCH_STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def log_tail(self, chars: int = 4000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def vera(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
        """Runs a `vera` CLI command against this stack's environment."""
        return subprocess.run(
            [sys.executable, "-m", "vera.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@contextlib.contextmanager
def launch(
    data_dir: Path,
    env: Mapping[str, str] | None = None,
    *,
    log_path: Path | None = None,
    cwd: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_SECONDS,
    up_args: tuple[str, ...] = (),
) -> Iterator[LaunchedStack]:
    """Runs `vera up` on ``data_dir`` (environment ``env``, by default ``launch_env``;
    ``up_args``: more of its options) on a free port until the block ends; the log goes to
    ``log_path`` (default: ``stack.log`` beside the data dir)."""
    stack = LaunchedStack(
        data_dir=data_dir,
        port=free_port(),
        env=dict(env) if env is not None else launch_env(data_dir),
        log_path=log_path or data_dir.parent / "stack.log",
        cwd=cwd,
        ready_timeout=ready_timeout,
        up_args=up_args,
    )
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
