"""Internal call authentication: every service call but health's needs the assertion
signed with the deployment's key; services without a key run only locally on loopback."""

from __future__ import annotations

import time

import grpc
import jwt
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pydantic import SecretStr

from vera.config import ConfigError, Settings, load_settings
from vera.errors import Unauthenticated, VeraError
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.auth import AssertionSigner, AssertionVerifier
from vera.rpc.client import open_channel
from vera.rpc.errors import error_info
from vera.rpc.server import ServiceBinding, create_server, mark_serving

KEY = SecretStr("internal-test-key-0123456789abcdef-0123456789")
OTHER_KEY = SecretStr("another-deployment-key-0123456789abcdef-0123")


class Echo(identity_pb2_grpc.IdentityServiceServicer):
    async def GetPrincipal(self, request, context):
        return identity_pb2.GetPrincipalResponse(
            principal=identity_pb2.Principal(principal_id=request.principal_id))


def _binding() -> ServiceBinding:
    return ServiceBinding("vera.identity.v1.IdentityService", Echo(),
                          identity_pb2_grpc.add_IdentityServiceServicer_to_server)


@pytest.fixture
async def address():
    running = create_server([_binding()], "127.0.0.1:0", Settings(rpc={"auth_key": KEY}))
    await running.server.start()
    await mark_serving(running)
    yield f"127.0.0.1:{running.port}"
    await running.stop(0)


async def _raw_call(address: str, metadata: tuple = ()) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetPrincipal(identity_pb2.GetPrincipalRequest(principal_id="p"),
                                    metadata=metadata, timeout=5)
    return caught.value


def _assert_unauthenticated(error: grpc.aio.AioRpcError, why: str) -> None:
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED
    info = error_info(error)
    assert info is not None and info.reason == "UNAUTHENTICATED"
    assert info.metadata["reason"] == why


async def test_a_call_without_an_assertion_is_refused(address) -> None:
    _assert_unauthenticated(await _raw_call(address), "missing")


@pytest.mark.parametrize("value", ["Bearer not-a-jwt", "Basic abc", "Bearer "])
async def test_a_garbled_assertion_is_refused(address, value) -> None:
    error = await _raw_call(address, (("authorization", value),))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error_info(error).reason == "UNAUTHENTICATED"


async def test_an_expired_assertion_is_refused(address) -> None:
    stale = AssertionSigner(KEY, "gateway", clock=lambda: time.time() - 3600)
    error = await _raw_call(address, (("authorization", stale.header()),))
    _assert_unauthenticated(error, "expired")


async def test_an_assertion_signed_with_another_key_is_refused(address) -> None:
    error = await _raw_call(address, (("authorization", AssertionSigner(OTHER_KEY, "gateway")
                                       .header()),))
    _assert_unauthenticated(error, "invalid")


async def test_a_caller_refused_for_its_own_assertion_sees_an_internal_fault(
    address, caplog
) -> None:
    """Not a failed login: a gateway must not answer its user "unauthenticated" because
    the deployment's key is wrong."""
    channel = open_channel(address, 5, auth_key=OTHER_KEY, caller="gateway")
    try:
        with pytest.raises(VeraError) as caught:
            await identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
                identity_pb2.GetPrincipalRequest(principal_id="p"))
    finally:
        await channel.close()
    assert caught.value.reason == "INTERNAL"
    assert caught.value.metadata == {"reason": "invalid", "credential": "internal"}
    assert "VERA_RPC__AUTH_KEY" in caplog.text


@pytest.mark.parametrize("claims", [
    {"aud": "someone-else"},
    {"iss": "https://auth.vera.example"},
    {"sub": None},
])
async def test_an_assertion_for_another_audience_or_without_a_caller_is_refused(
    address, claims
) -> None:
    now = int(time.time())
    payload = {"iss": "vera-internal", "aud": "vera-internal", "sub": "gateway",
               "iat": now, "exp": now + 300, **claims}
    token = jwt.encode({k: v for k, v in payload.items() if v is not None},
                       KEY.get_secret_value(), algorithm="HS256")
    error = await _raw_call(address, (("authorization", f"Bearer {token}"),))
    _assert_unauthenticated(error, "invalid")


async def test_health_needs_no_assertion(address) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_signed_call_is_served(address) -> None:
    channel = open_channel(address, 5, auth_key=KEY, caller="gateway")
    try:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        for _ in range(3):  # one cached assertion serves many calls
            reply = await stub.GetPrincipal(identity_pb2.GetPrincipalRequest(principal_id="p"))
            assert reply.principal.principal_id == "p"
    finally:
        await channel.close()


def test_the_signer_reuses_its_assertion_and_renews_it_before_expiry() -> None:
    now = [1_800_000_000.0]
    signer = AssertionSigner(KEY, "retrieval", clock=lambda: now[0])
    first = signer.header()
    now[0] += 200
    assert signer.header() == first
    now[0] += 60  # within a minute of expiry: a fresh one
    renewed = signer.header()
    assert renewed != first
    claims = jwt.decode(renewed.removeprefix("Bearer "), KEY.get_secret_value(),
                        algorithms=["HS256"], audience="vera-internal",
                        options={"verify_exp": False, "verify_iat": False})
    assert claims["sub"] == "retrieval" and claims["exp"] - claims["iat"] == 300


def test_a_remembered_assertion_still_expires() -> None:
    now = [1_800_000_000.0]
    signer = AssertionSigner(KEY, "cli", clock=lambda: now[0])
    verifier = AssertionVerifier(KEY, clock=lambda: now[0])
    header = signer.header()
    verifier.verify(header)
    now[0] += 400
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(header)
    assert caught.value.metadata["reason"] == "expired"


# --- who may run without a key ---------------------------------------------------------


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_a_service_outside_local_refuses_to_start_without_a_key(environment) -> None:
    with pytest.raises(ConfigError, match="VERA_RPC__AUTH_KEY"):
        create_server([_binding()], "127.0.0.1:0", Settings(environment=environment))


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", "10.1.2.3:0", "vera-knowledge:0"])
def test_a_local_service_off_loopback_refuses_to_start_without_a_key(address) -> None:
    with pytest.raises(ConfigError, match="VERA_RPC__AUTH_KEY"):
        create_server([_binding()], address, Settings())


async def test_a_keyed_service_may_bind_every_interface() -> None:
    running = create_server([_binding()], "0.0.0.0:0", Settings(environment="prod",
                                                                rpc={"auth_key": KEY}))
    await running.stop(0)


def test_a_short_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="VERA_RPC__AUTH_KEY"):
        load_settings(rpc={"auth_key": "too-short"})


# --- reflection ------------------------------------------------------------------------


async def _list_services(address: str, metadata: tuple = ()) -> list[str]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
            metadata=metadata, timeout=5)
        replies = [reply async for reply in call]
    return [s.name for s in replies[0].list_services_response.service]


async def test_reflection_is_off_by_default() -> None:
    running = create_server([_binding()], "127.0.0.1:0", Settings())
    await running.server.start()
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _list_services(f"127.0.0.1:{running.port}")
        assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
    finally:
        await running.stop(0)


async def test_configured_reflection_needs_the_assertion_too() -> None:
    settings = Settings(rpc={"auth_key": KEY, "reflection": True})
    running = create_server([_binding()], "127.0.0.1:0", settings)
    await running.server.start()
    address = f"127.0.0.1:{running.port}"
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _list_services(address)
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
        signed = (("authorization", AssertionSigner(KEY, "cli").header()),)
        assert "vera.identity.v1.IdentityService" in await _list_services(address, signed)
    finally:
        await running.stop(0)
