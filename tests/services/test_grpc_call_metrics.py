"""A service's gRPC server counts every finished call of a registered method by its status
code (a domain error's included), and nothing a caller names beyond them."""

from __future__ import annotations

import pytest

from vera.errors import NotFound, VeraError
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server

SERVICE = "vera.identity.v1.IdentityService"


class Missing(identity_pb2_grpc.IdentityServiceServicer):
    async def GetPrincipal(self, request, context):
        raise NotFound("no such principal")


def handled(registry, **labels: str) -> float | None:
    return registry.get_sample_value("vera_grpc_server_handled_total", labels)


async def test_calls_are_counted_per_method_and_code() -> None:
    running = create_server([ServiceBinding(
        SERVICE, Missing(), identity_pb2_grpc.add_IdentityServiceServicer_to_server)],
        "127.0.0.1:0")
    await running.server.start()
    channel = open_channel(f"127.0.0.1:{running.port}", 8)
    stub = identity_pb2_grpc.IdentityServiceStub(channel)
    try:
        for _ in range(2):
            with pytest.raises(NotFound):
                await stub.GetPrincipal(identity_pb2.GetPrincipalRequest())
        unknown = channel.unary_unary(f"/{SERVICE}/NoSuchMethod")
        with pytest.raises(VeraError):
            await unknown(b"")
    finally:
        await channel.close()
        await running.stop(0)
    registry = running.metrics.registry
    assert handled(registry, grpc_service=SERVICE, grpc_method="GetPrincipal",
                   grpc_code="NOT_FOUND") == 2
    assert registry.get_sample_value(
        "vera_grpc_server_handling_seconds_count",
        {"grpc_service": SERVICE, "grpc_method": "GetPrincipal"}) == 2
    methods = {
        sample.labels["grpc_method"]
        for family in registry.collect() for sample in family.samples
        if "grpc_method" in sample.labels
    }
    assert methods == {"GetPrincipal"}
