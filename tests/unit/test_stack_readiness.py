"""`vera up`'s children count as ready only when their own listener answers: a stranger on
the port never does, and a child that cannot bind its port is reported with the port, at
start and when it keeps crashing. Real child processes (``python -m http.server``)."""

from __future__ import annotations

import os
import sys

import pytest
from harness import port_held

from vera.config import StackSettings
from vera.stack import StackError
from vera.stack.ports import free_port
from vera.stack.supervisor import Child, GaveUp, Listener, RestartPolicy, http_ready, keep_running

READY_TIMEOUT_SECONDS = 30.0
HOW_TO_MOVE = "set VERA_TEST__PORT to move it"


def _http_server_child(port: int) -> Child:
    """A child that binds 127.0.0.1:``port`` itself and answers GET / with 200."""
    return Child(
        "web",
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        os.environ,
        http_ready(f"http://127.0.0.1:{port}/", READY_TIMEOUT_SECONDS),
        [Listener("127.0.0.1", port, HOW_TO_MOVE)],
    )


async def test_a_child_serving_on_its_own_port_is_ready() -> None:
    child = _http_server_child(free_port())
    try:
        await child.start()
        assert child.returncode is None
        assert child.listens()
    finally:
        await child.stop(5)


@pytest.mark.parametrize("answering", [True, False], ids=["http-stranger", "bare-socket"])
async def test_a_stranger_on_the_port_never_makes_the_child_ready(answering: bool) -> None:
    port = free_port()
    child = _http_server_child(port)
    with port_held(port, answering=answering):
        try:
            with pytest.raises(StackError) as caught:
                await child.start()
        finally:
            await child.stop(5)
    assert child.returncode not in (None, 0)
    assert f"port {port} is in use" in str(caught.value)
    assert "VERA_TEST__PORT" in str(caught.value)


async def test_a_child_that_keeps_failing_to_bind_is_given_up_naming_the_port() -> None:
    port = free_port()
    child = _http_server_child(port)
    await child.start()
    try:
        assert child.process is not None
        child.process.kill()
        await child.process.wait()
        with port_held(port, answering=True):
            policy = RestartPolicy(StackSettings(max_restarts=1, restart_backoff_seconds=0.05))
            with pytest.raises(GaveUp) as caught:
                await keep_running(child, policy, on_restart=lambda: None)
    finally:
        await child.stop(5)
    assert (caught.value.child, caught.value.crashes) == ("web", 2)
    assert f"port {port} is in use" in str(caught.value)


def test_a_listener_is_in_use_only_while_another_socket_listens_there() -> None:
    port = free_port()
    listener = Listener("127.0.0.1", port, HOW_TO_MOVE)
    assert not listener.in_use()
    with port_held(port, answering=False):
        assert listener.in_use()
    assert not listener.in_use()
