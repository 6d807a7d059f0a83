"""Real services built by their ``create()`` with the deployment's key: unsigned callers
are refused, signed ones are served, and service-to-service calls sign themselves."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
from pydantic import SecretStr

from vera.config import ConfigError, Settings
from vera.errors import Unauthorized, VeraError
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.errors import error_info
from vera.rpc.server import HostedService
from vera.services.identity import server as identity_server
from vera.services.knowledge import server as knowledge_server
from vera.services.snapshot import server as snapshot_server
from vera.snapshot.v1 import snapshot_pb2, snapshot_pb2_grpc

KEY = SecretStr("deployment-internal-key-0123456789abcdef-01234")


def _settings(pg_dsn: str, **extra) -> Settings:
    return Settings(environment="dev", database={"dsn": pg_dsn}, rpc={"auth_key": KEY},
                    **extra)


async def _started(hosted: HostedService) -> AsyncIterator[str]:
    await hosted.running.server.start()
    try:
        yield f"127.0.0.1:{hosted.running.port}"
    finally:
        await hosted.running.stop(grace=0)
        await hosted.aclose()


@pytest.fixture
async def knowledge(pg_dsn: str) -> AsyncIterator[str]:
    hosted = await knowledge_server.create(_settings(pg_dsn), "127.0.0.1:0")
    async for address in _started(hosted):
        yield address


@pytest.fixture
async def identity(pg_dsn: str) -> AsyncIterator[str]:
    hosted = await identity_server.create(_settings(pg_dsn), "127.0.0.1:0")
    async for address in _started(hosted):
        yield address


async def test_an_unsigned_caller_is_refused_by_a_real_service(knowledge) -> None:
    async with grpc.aio.insecure_channel(knowledge) as channel:
        stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ListChanges(knowledge_pb2.ListChangesRequest(page_size=1), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error_info(caught.value).reason == "UNAUTHENTICATED"


async def test_a_channel_with_the_key_is_served(knowledge) -> None:
    channel = open_channel(knowledge, 10, auth_key=KEY, caller="cli")
    try:
        reply = await knowledge_pb2_grpc.KnowledgeServiceStub(channel).ListChanges(
            knowledge_pb2.ListChangesRequest(page_size=1))
    finally:
        await channel.close()
    assert reply.head_position == 0


async def test_a_channel_without_the_key_is_refused(identity) -> None:
    channel = open_channel(identity, 10)
    try:
        with pytest.raises(VeraError) as caught:
            await identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
                identity_pb2.GetPrincipalRequest(principal_id=str(uuid.uuid4())))
    finally:
        await channel.close()
    assert caught.value.metadata == {"reason": "missing", "credential": "internal"}


async def test_snapshot_signs_its_calls_to_knowledge(pg_dsn, knowledge) -> None:
    hosted = await snapshot_server.create(
        _settings(pg_dsn, services={"knowledge": knowledge}), "127.0.0.1:0")
    async for address in _started(hosted):
        channel = open_channel(address, 10, auth_key=KEY, caller="gateway")
        try:
            created = await snapshot_pb2_grpc.SnapshotServiceStub(channel).CreateSnapshot(
                snapshot_pb2.CreateSnapshotRequest(
                    principal_id=str(uuid.uuid4()), scope_id=str(uuid.uuid4()),
                    assembler_version="assembler-1;minilm-l6-v2;index-1"))
        finally:
            await channel.close()
        assert created.snapshot.fact_count == 0


async def test_the_local_principal_is_refused_outside_local_dev(identity) -> None:
    channel = open_channel(identity, 10, auth_key=KEY, caller="gateway")
    try:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        with pytest.raises(Unauthorized):
            await stub.EnsureLocalPrincipal(
                identity_pb2.EnsureLocalPrincipalRequest(principal_id=str(uuid.uuid4())))
    finally:
        await channel.close()


async def test_a_local_identity_with_token_verification_refuses_the_local_principal(
    pg_dsn,
) -> None:
    settings = Settings(database={"dsn": pg_dsn},
                        mcp={"jwt_secret": "a-gateway-token-secret-0123456789abcdef"})
    assert settings.auth_profile == "remote-authenticated"
    hosted = await identity_server.create(settings, "127.0.0.1:0")
    async for address in _started(hosted):
        channel = open_channel(address, 10)
        try:
            with pytest.raises(Unauthorized):
                await identity_pb2_grpc.IdentityServiceStub(channel).EnsureLocalPrincipal(
                    identity_pb2.EnsureLocalPrincipalRequest(principal_id=str(uuid.uuid4())))
        finally:
            await channel.close()


async def test_a_real_service_outside_local_refuses_to_start_without_the_key(pg_dsn) -> None:
    with pytest.raises(ConfigError, match="VERA_RPC__AUTH_KEY"):
        await knowledge_server.create(
            Settings(environment="prod", database={"dsn": pg_dsn}), "127.0.0.1:0")


async def test_a_service_component_may_not_write_through_another_service(knowledge) -> None:
    """Retrieval reads knowledge's log; its assertion, replayed or misused, proposes
    nothing."""
    channel = open_channel(knowledge, 10, auth_key=KEY, caller="retrieval")
    try:
        stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        await stub.ListChanges(knowledge_pb2.ListChangesRequest(page_size=1))
        with pytest.raises(VeraError) as caught:
            await stub.ProposeFact(knowledge_pb2.ProposeFactRequest())
    finally:
        await channel.close()
    assert caught.value.metadata == {"reason": "caller", "credential": "internal"}
