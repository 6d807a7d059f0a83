"""Stopping an HTTP front (vera.entrypoints.draining): the first stop signal turns the
readiness probe to 503 and refuses new requests while the request in flight finishes;
a request that outlasts the grace does not hold the stop up."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vera.entrypoints.draining import DrainGate, DrainingServer
from vera.stack.ports import free_port


class SlowApp:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

        async def slow(request: Request) -> JSONResponse:
            self.entered.set()
            await self.release.wait()
            return JSONResponse({"done": True})

        async def readyz(request: Request) -> JSONResponse:
            return JSONResponse({"status": "ok"})

        self.app = Starlette(routes=[Route("/slow", slow), Route("/readyz", readyz)])


def _serving(app: SlowApp, grace: float) -> tuple[DrainingServer, DrainGate, str]:
    gate = DrainGate(app.app, frozenset({"/readyz"}))
    port = free_port()
    config = uvicorn.Config(
        gate,
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_config=None,
        timeout_graceful_shutdown=1,
    )
    server = DrainingServer(config, gate, grace)
    return server, gate, f"http://127.0.0.1:{port}"


async def _until(predicate, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        # uvicorn and the signal handler set plain flags: nothing to wait on but them.
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_readiness_turns_503_before_the_call_in_flight_completes() -> None:
    app = SlowApp()
    server, gate, url = _serving(app, grace=10)
    serving = asyncio.create_task(server.serve())
    await _until(lambda: server.started)
    async with httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/readyz")).status_code == 200
        in_flight = asyncio.create_task(client.get("/slow"))
        await asyncio.wait_for(app.entered.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)
        await _until(lambda: gate.closed)
        async with httpx.AsyncClient(base_url=url) as fresh:  # a new connection is answered
            assert (await fresh.get("/readyz")).status_code == 503
            assert (await fresh.get("/slow")).status_code == 503  # nothing new is taken
        assert not in_flight.done() and not serving.done()
        app.release.set()
        reply = await asyncio.wait_for(in_flight, 5)
        assert reply.status_code == 200 and reply.json() == {"done": True}
    await asyncio.wait_for(serving, 10)


async def test_a_call_past_the_grace_does_not_hold_the_stop() -> None:
    app = SlowApp()
    server, gate, url = _serving(app, grace=0.3)
    serving = asyncio.create_task(server.serve())
    await _until(lambda: server.started)
    async with httpx.AsyncClient(base_url=url) as client:
        in_flight = asyncio.create_task(client.get("/slow"))
        await asyncio.wait_for(app.entered.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(serving, 10)  # the grace, then uvicorn's own 1 s
        assert gate.active == 0
        in_flight.cancel()
