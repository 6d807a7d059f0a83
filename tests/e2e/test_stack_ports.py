"""`vera up` with one of its ports taken (a bare socket, or a server answering every probe
200 as VERA would) stops at once, exit 1, with one line naming the port and the setting
that moves it, and never says it is ready; a normal start says it once its own gateway and
API listen on their ports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from harness import port_held

from vera.stack.launcher import LaunchedStack, launch_env
from vera.stack.ports import free_port
from vera.stack.run_files import read_stack_file, stack_file

pytestmark = pytest.mark.e2e

UP_TIMEOUT_SECONDS = 120.0


def _vera_up(data_dir: Path, mcp_port: int, api_port: int) -> subprocess.CompletedProcess:
    env = launch_env(data_dir, VERA_API__PORT=str(api_port))
    return subprocess.run(
        [sys.executable, "-m", "vera.cli", "up", "--data-dir", str(data_dir),
         "--port", str(mcp_port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=UP_TIMEOUT_SECONDS,
    )


@pytest.mark.parametrize("answering", [True, False], ids=["http-stranger", "bare-socket"])
@pytest.mark.parametrize(
    ("front", "setting"), [("gateway", "VERA_MCP__PORT"), ("api", "VERA_API__PORT")]
)
def test_a_taken_port_stops_vera_up_naming_the_port_and_its_setting(
    tmp_path: Path, front: str, setting: str, answering: bool
) -> None:
    mcp_port, api_port = free_port(), free_port()
    taken = mcp_port if front == "gateway" else api_port
    data_dir = tmp_path / "data"
    with port_held(taken, answering=answering):
        result = _vera_up(data_dir, mcp_port, api_port)
    assert result.returncode == 1, result.stderr
    assert "VERA is ready" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"port {taken} is in use" in lines[0]
    assert setting in lines[0]
    assert not stack_file(data_dir).exists()


def _listening_ports(pid: int) -> set[int]:
    return {
        conn.laddr.port
        for conn in psutil.Process(pid).net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
    }


def test_a_normal_start_says_ready_from_its_own_listeners(stack: LaunchedStack) -> None:
    assert "VERA is ready" in stack.log_path.read_text(errors="replace")
    info = read_stack_file(stack.data_dir)
    assert info is not None, stack.log_tail()
    assert stack.port in _listening_ports(info["pids"]["gateway"])
    assert int(stack.env["VERA_API__PORT"]) in _listening_ports(info["pids"]["api"])
