"""Stopping a service: health turns NOT_SERVING, new calls are refused, calls in flight
finish; the service's own cleanup runs however the server ends."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vera.config import RpcSettings
from vera.errors import Unavailable
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving, serve_until_signalled


class Slow(identity_pb2_grpc.IdentityServiceServicer):
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def GetPrincipal(self, request, context):
        self.entered.set()
        await self.release.wait()
        return identity_pb2.GetPrincipalResponse(
            principal=identity_pb2.Principal(principal_id=request.principal_id))


def _server(servicer: Slow):
    return create_server([ServiceBinding(
        "vera.identity.v1.IdentityService", servicer,
        identity_pb2_grpc.add_IdentityServiceServicer_to_server)], "127.0.0.1:0")


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5)
    return reply.status


async def test_a_call_in_flight_finishes_while_the_server_drains() -> None:
    servicer = Slow()
    running = _server(servicer)
    await running.server.start()
    await mark_serving(running)
    address = f"127.0.0.1:{running.port}"
    channel = open_channel(address, 10)
    stub = identity_pb2_grpc.IdentityServiceStub(channel)
    try:
        slow = asyncio.ensure_future(
            stub.GetPrincipal(identity_pb2.GetPrincipalRequest(principal_id="p")))
        await asyncio.wait_for(servicer.entered.wait(), 5)
        stopping = asyncio.create_task(running.stop(grace=10))
        await asyncio.sleep(0.1)
        assert not stopping.done()
        assert await _health(address) == health_pb2.HealthCheckResponse.NOT_SERVING
        with pytest.raises(Unavailable):  # nothing new is taken while draining
            await stub.GetPrincipal(identity_pb2.GetPrincipalRequest(principal_id="q"))
        servicer.release.set()
        reply = await asyncio.wait_for(slow, 5)
        assert reply.principal.principal_id == "p"
        await asyncio.wait_for(stopping, 5)
    finally:
        await channel.close()


async def test_the_drain_ends_after_the_grace() -> None:
    servicer = Slow()
    running = _server(servicer)
    await running.server.start()
    channel = open_channel(f"127.0.0.1:{running.port}", 10)
    try:
        slow = asyncio.ensure_future(identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
            identity_pb2.GetPrincipalRequest(principal_id="p")))
        await asyncio.wait_for(servicer.entered.wait(), 5)
        await asyncio.wait_for(running.stop(grace=0.2), 5)
        with pytest.raises(Unavailable):
            await slow
    finally:
        await channel.close()


def test_a_stopping_service_waits_for_the_longest_deadline() -> None:
    rpc = RpcSettings(deadline_seconds=10, retrieval_deadline_seconds=30)
    assert rpc.longest_deadline_seconds == 30


async def test_a_signalled_service_drains_then_cleans_up() -> None:
    servicer = Slow()
    running = _server(servicer)
    cleaned: list[bool] = []

    async def on_stop() -> None:
        cleaned.append(servicer.release.is_set())

    serving = asyncio.create_task(serve_until_signalled(running, on_stop, grace=10))
    await _until_started(running.port)
    channel = open_channel(f"127.0.0.1:{running.port}", 10)
    try:
        slow = asyncio.ensure_future(identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
            identity_pb2.GetPrincipalRequest(principal_id="p")))
        await asyncio.wait_for(servicer.entered.wait(), 5)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.2)
        assert not serving.done()
        # The health flip comes first: probes see NOT_SERVING while the call is in flight.
        assert await _health(f"127.0.0.1:{running.port}") == (
            health_pb2.HealthCheckResponse.NOT_SERVING)
        assert not slow.done()
        servicer.release.set()
        assert (await asyncio.wait_for(slow, 5)).principal.principal_id == "p"
        await asyncio.wait_for(serving, 5)
    finally:
        await channel.close()
    assert cleaned == [True]


async def _until_started(port: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), wait_for_ready=True, timeout=5)


async def test_cleanup_runs_when_serving_is_cancelled() -> None:
    running = _server(Slow())
    cleaned: list[str] = []

    async def on_stop() -> None:
        cleaned.append("closed")

    serving = asyncio.create_task(serve_until_signalled(running, on_stop, grace=10))
    await _until_started(running.port)
    serving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await serving
    assert cleaned == ["closed"]

