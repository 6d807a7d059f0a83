"""Domain errors cross gRPC as one ErrorInfo and come back as the same exception."""

from __future__ import annotations

import asyncio

import pytest

from vera.errors import AmbiguousProject, InvalidInput, VeraError
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving


class Failing(identity_pb2_grpc.IdentityServiceServicer):
    async def GetPrincipal(self, request, context):
        raise InvalidInput("principal_id", reason="not_found")

    async def ResolveProject(self, request, context):
        raise AmbiguousProject(candidates=["a", "b"])

    async def ResolveScopes(self, request, context):
        raise RuntimeError("database password is hunter2")


@pytest.fixture
async def stub():
    running = create_server([ServiceBinding(
        "vera.identity.v1.IdentityService", Failing(),
        identity_pb2_grpc.add_IdentityServiceServicer_to_server)], "127.0.0.1:0")
    await running.server.start()
    await mark_serving(running)
    channel = open_channel(f"127.0.0.1:{running.port}", deadline_seconds=5)
    yield identity_pb2_grpc.IdentityServiceStub(channel)
    await channel.close()
    await running.stop(0)


async def test_invalid_input_keeps_field_and_metadata(stub):
    with pytest.raises(InvalidInput) as caught:
        await stub.GetPrincipal(identity_pb2.GetPrincipalRequest())
    assert caught.value.field == "principal_id"
    assert caught.value.metadata == {"field": "principal_id", "reason": "not_found"}


async def test_lists_travel_in_metadata(stub):
    with pytest.raises(AmbiguousProject) as caught:
        await stub.ResolveProject(identity_pb2.ResolveProjectRequest())
    assert caught.value.metadata["candidates"] == "a,b"


async def test_unexpected_errors_are_redacted(stub):
    with pytest.raises(VeraError) as caught:
        await stub.ResolveScopes(identity_pb2.ResolveScopesRequest())
    assert caught.value.reason == "INTERNAL"
    assert "hunter2" not in caught.value.message


async def test_calls_without_a_deadline_get_the_default():
    channel = open_channel("127.0.0.1:9", deadline_seconds=0.2)  # nothing listens there
    stub = identity_pb2_grpc.IdentityServiceStub(channel)
    # wait_for_ready would wait forever for the server; only the default deadline ends it.
    call = stub.GetPrincipal(identity_pb2.GetPrincipalRequest(), wait_for_ready=True)
    with pytest.raises(VeraError) as caught:
        await asyncio.wait_for(call, timeout=30)
    assert caught.value.reason == "UNAVAILABLE"
    await channel.close()
