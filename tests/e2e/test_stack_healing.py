"""`vera up` heals: a child that dies is started again on the same address while the others
keep serving; a caller meanwhile gets a structured error within its budget, never a hang;
a stopping gateway answers 503 on its probe while its call in flight finishes; and after
repeated crashes the stack gives up with a non-zero exit.

The tests share one stack and run in order: the last one ends it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator

import anyio
import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from harness import without_ids
from mcp import MCPError

from vera.stack.launcher import LaunchedStack, launch, launch_env
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

BUDGET_SECONDS = 10.0
MAX_RESTARTS = 2
RESTART_TIMEOUT_SECONDS = 90.0


@pytest.fixture(scope="module")
def healing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("healing") / "data"
    env = launch_env(
        data_dir,
        # A first delay long enough that a call made right after a kill meets the outage.
        VERA_STACK__RESTART_BACKOFF_SECONDS="1",
        VERA_STACK__MAX_RESTARTS=str(MAX_RESTARTS),
        VERA_STACK__RESTART_WINDOW_SECONDS="600",
        VERA_MCP__REQUEST_BUDGET_SECONDS=str(BUDGET_SECONDS),
    )
    with launch(data_dir, env) as running:
        yield running


def _info(stack: LaunchedStack) -> dict:
    info = read_stack_file(stack.data_dir)
    assert info is not None, stack.log_tail()
    return info


def _until_restarted(stack: LaunchedStack, name: str, restarts: int) -> dict:
    give_up = time.monotonic() + RESTART_TIMEOUT_SECONDS
    while time.monotonic() < give_up:
        info = _info(stack)
        if info["restarts"][name] >= restarts:
            return info
        time.sleep(0.1)
    raise AssertionError(f"{name} did not come back:\n{stack.log_tail()}")


def _health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
    return reply.status


async def _pack_error(stack: LaunchedStack) -> dict:
    """knowledge_get_context_pack of an unknown pack: the snapshot service answers it."""
    async with stack.mcp_client() as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("knowledge_get_context_pack", {"pack_id": str(uuid.uuid4())})
    return caught.value.error.data


async def test_a_killed_service_comes_back_on_its_address_while_the_rest_serves(healing):
    before = _info(healing)
    address = before["services"]["snapshot"]
    os.kill(before["pids"]["snapshot"], signal.SIGKILL)

    # During the outage: a call that needs snapshot fails structured, with the outage
    # answer (the budget bounds it; how fast is not this test's to time)...
    data = await _pack_error(healing)
    assert without_ids(data) == {"code": "internal_error", "reason": "unavailable"}
    # ...and one that does not keeps working.
    async with healing.mcp_client() as client:
        search = await client.call_tool("knowledge_search", {"query": "deploy pipeline"})
    assert not search.is_error

    after = _until_restarted(healing, "snapshot", 1)
    assert after["services"] == before["services"]
    assert after["pids"]["snapshot"] != before["pids"]["snapshot"]
    assert _health(address) == health_pb2.HealthCheckResponse.SERVING
    untouched = {name: pid for name, pid in before["pids"].items() if name != "snapshot"}
    assert {name: after["pids"][name] for name in untouched} == untouched
    assert all(count == 0 for name, count in after["restarts"].items() if name != "snapshot")

    # Callers reconnect on their own: the same call now reaches the restarted service.
    give_up = time.monotonic() + 30
    while without_ids(await _pack_error(healing)) != {"code": "expired_context_pack"}:
        assert time.monotonic() < give_up, healing.log_tail()
        await anyio.sleep(0.5)


async def test_a_stopping_gateway_answers_503_while_its_call_in_flight_finishes(healing):
    before = _info(healing)
    retrieval = psutil.Process(before["pids"]["retrieval"])
    healthz = f"http://127.0.0.1:{healing.port}/healthz"
    result: dict = {}
    listed = anyio.Event()

    async def search() -> None:
        async with healing.mcp_client() as client:
            # The client checks a result against the tool's output schema, listing the tools
            # first if it has not: list them now, not against the stopping gateway.
            await client.list_tools()
            listed.set()
            result["reply"] = await client.call_tool("knowledge_search", {"query": "runbook"})

    retrieval.suspend()  # the gateway's call now waits on retrieval
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(search)
            await listed.wait()
            await anyio.sleep(1.0)  # the call is in flight, blocked in retrieval
            os.kill(before["pids"]["gateway"], signal.SIGTERM)
            await anyio.sleep(0.5)
            async with httpx.AsyncClient() as probe:
                assert (await probe.get(healthz)).status_code == 503
            assert "reply" not in result
            retrieval.resume()
    finally:
        retrieval.resume()
    assert not result["reply"].is_error  # the call finished with its answer
    # The gateway left (a stop nobody asked the supervisor for) and was started again.
    after = _until_restarted(healing, "gateway", 1)
    assert after["pids"]["gateway"] != before["pids"]["gateway"]
    async with httpx.AsyncClient() as probe:
        assert (await probe.get(healthz)).status_code == 200


def test_a_service_that_keeps_crashing_makes_the_stack_give_up(healing):
    """The restarted identity cannot bind its port (another process took it), so it exits
    at once every time: after MAX_RESTARTS restarts `vera up` stops everything, exit 1,
    naming identity and the port."""
    info = _info(healing)
    host, port = info["services"]["identity"].rsplit(":", 1)
    identity = psutil.Process(info["pids"]["identity"])
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        identity.kill()
        identity.wait(5)
        squatter.bind((host, int(port)))
        squatter.listen()
        assert healing.process is not None
        assert healing.process.wait(timeout=120) == 1, healing.log_tail()
    gave_up = [line for line in healing.log_tail().splitlines() if "giving up" in line]
    assert len(gave_up) == 1, healing.log_tail()
    assert "identity" in gave_up[0]
    assert f"port {port} is in use" in gave_up[0]
    others = [pid for name, pid in info["pids"].items() if name != "identity"]
    assert not [pid for pid in others if _running(pid)], healing.log_tail()
    assert not (healing.data_dir / "run" / "stack.json").exists()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_stopping_vera_up_drains_the_call_in_flight(tmp_path):
    """SIGTERM to `vera up`: the API, then the gateway stop first; the gateway's probe
    answers 503 while its call in flight (blocked in retrieval) still completes, and the
    stack exits 0."""
    data_dir = tmp_path / "data"
    with launch(data_dir) as stack:
        info = _info(stack)
        retrieval = psutil.Process(info["pids"]["retrieval"])
        healthz = f"http://127.0.0.1:{stack.port}/healthz"
        result: dict = {}
        listed = anyio.Event()

        async def search() -> None:
            async with stack.mcp_client() as client:
                await client.list_tools()
                listed.set()
                result["reply"] = await client.call_tool("knowledge_search", {"query": "adr"})

        async def stop() -> None:
            result["exit"] = await anyio.to_thread.run_sync(stack.stop)

        retrieval.suspend()
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(search)
                await listed.wait()
                await anyio.sleep(0.5)  # the call is in flight, blocked in retrieval
                tasks.start_soon(stop)
                async with httpx.AsyncClient() as probe:
                    for _ in range(100):  # the API stops first, then the gateway
                        if (await probe.get(healthz)).status_code == 503:
                            break
                        await anyio.sleep(0.1)
                    else:
                        raise AssertionError(stack.log_tail())
                assert "reply" not in result
                retrieval.resume()
        finally:
            with contextlib.suppress(psutil.NoSuchProcess):  # gone with the stack
                retrieval.resume()
        assert not result["reply"].is_error
        assert result["exit"] == 0, stack.log_tail()
