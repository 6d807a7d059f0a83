"""Runs the real stack (`vera up`) as a user would, in a temporary data dir."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

READY_TIMEOUT_SECONDS = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Stack:
    data_dir: Path
    port: int
    env: dict[str, str]
    process: subprocess.Popen | None = None

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        log = (self.data_dir.parent / "stack.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vera.cli", "up", "--data-dir", str(self.data_dir),
             "--port", str(self.port)],
            env=self.env, stdout=log, stderr=subprocess.STDOUT)
        give_up = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < give_up:
            if self.process.poll() is not None:
                raise AssertionError(f"vera up exited with {self.process.returncode}: "
                                     + self.log_tail())
            stack_json = self.data_dir / "run" / "stack.json"
            if stack_json.exists():
                try:
                    if httpx.get(f"http://127.0.0.1:{self.port}/healthz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
            time.sleep(0.3)
        raise AssertionError("stack did not become ready: " + self.log_tail())

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self.process = None
        return code

    def log_tail(self) -> str:
        path = self.data_dir.parent / "stack.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def vera(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vera.cli", *args], env=self.env,
                              capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("stack")
    env = {
        **os.environ,
        "VERA_OBSERVABILITY__MCP_METRICS_PORT": str(free_port()),
        "VERA_API__PORT": str(free_port()),
        "VERA_DATA_DIR": str(root / "data"),
    }
    env.pop("VERA_DATABASE__DSN", None)
    running = Stack(data_dir=root / "data", port=free_port(), env=env)
    running.start()
    try:
        yield running
    finally:
        if running.process is not None:
            running.stop()


# The authenticated profile (tests/e2e/test_auth_flow.py): built-in JWT verification and
# open registration, so the documented register -> API key -> mcp-token flow runs end to end.
AUTH_SECRET = "e2e-shared-mcp-signing-secret-0123456789abcdef"
AUTH_ISSUER = "https://auth.vera.e2e"
AUTH_AUDIENCE = "https://mcp.vera.e2e"


@pytest.fixture(scope="module")
def auth_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("auth-stack")
    env = {
        **os.environ,
        "VERA_OBSERVABILITY__MCP_METRICS_PORT": str(free_port()),
        "VERA_API__PORT": str(free_port()),
        "VERA_API__OPEN_REGISTRATION": "true",
        "VERA_MCP__JWT_SECRET": AUTH_SECRET,
        "VERA_MCP__AUTH_ISSUER": AUTH_ISSUER,
        "VERA_MCP__AUTH_AUDIENCE": AUTH_AUDIENCE,
        "VERA_DATA_DIR": str(root / "data"),
    }
    env.pop("VERA_DATABASE__DSN", None)
    running = Stack(data_dir=root / "data", port=free_port(), env=env)
    running.start()
    try:
        yield running
    finally:
        if running.process is not None:
            running.stop()
