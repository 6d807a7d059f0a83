"""Internal channels spread calls, not connections, over every address their target
resolves to, and pass over a replica whose health says it is not serving (still loading,
or draining): ``vera.rpc.retries.service_config``. The chart's headless Services give a
`dns:///` name one address per replica; here the `ipv4:` target lists two real servers."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from grpc_health.v1 import health_pb2

from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import RunningServer, ServiceBinding, create_server, mark_serving

CALLS = 20


class Replica(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, name: str, served: Counter[str]) -> None:
        self.name = name
        self.served = served

    async def Search(self, request, context):
        self.served[self.name] += 1
        return retrieval_pb2.SearchResponse()


@pytest.fixture
async def replicas():
    served: Counter[str] = Counter()
    running: list[RunningServer] = []
    for name in ("a", "b"):
        server = create_server([ServiceBinding(
            "vera.retrieval.v1.RetrievalService", Replica(name, served),
            retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server)], "127.0.0.1:0")
        await server.server.start()
        await mark_serving(server)
        running.append(server)
    target = "ipv4:" + ",".join(f"127.0.0.1:{server.port}" for server in running)
    channel = open_channel(target, deadline_seconds=10)
    yield dict(zip("ab", running, strict=True)), retrieval_pb2_grpc.RetrievalServiceStub(
        channel), served
    await channel.close()
    for server in running:
        await server.stop(0)


async def _calls(stub, served: Counter[str]) -> Counter[str]:
    served.clear()
    for _ in range(CALLS):
        await stub.Search(retrieval_pb2.SearchRequest(query="q"), wait_for_ready=True)
    return Counter(served)


async def test_one_channel_spreads_its_calls_over_every_replica(replicas) -> None:
    _, stub, served = replicas
    await _calls(stub, served)  # until both are connected, the first one takes the calls
    assert await _calls(stub, served) == {"a": CALLS // 2, "b": CALLS // 2}


async def test_a_replica_that_stops_serving_gets_no_more_calls(replicas) -> None:
    servers, stub, served = replicas
    await _calls(stub, served)  # both connected and watched
    for name in ("", *servers["b"].service_names):  # as a draining service reports
        await servers["b"].health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    await asyncio.sleep(0.5)  # the watch delivers the change
    assert await _calls(stub, served) == {"a": CALLS}

    await mark_serving(servers["b"])
    await asyncio.sleep(0.5)
    assert set(await _calls(stub, served)) == {"a", "b"}
