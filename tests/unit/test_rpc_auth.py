"""Internal call authentication: every service call but health's needs an assertion for
that service, signed with the deployment's key (or the next one, during a rotation), from
a component allowed the method; services without a key run only locally on loopback."""

from __future__ import annotations

import itertools
import time

import grpc
import jwt
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pydantic import SecretStr

from vera.config import ConfigError, Settings, load_settings
from vera.errors import Unauthenticated, Unauthorized, VeraError
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.auth import LIFETIME_SECONDS, AssertionSigner, AssertionVerifier
from vera.rpc.client import open_channel
from vera.rpc.errors import error_info
from vera.rpc.server import RunningServer, ServiceBinding, create_server, mark_serving

KEY = SecretStr("internal-test-key-0123456789abcdef-0123456789")
OTHER_KEY = SecretStr("another-deployment-key-0123456789abcdef-0123")
NEXT_KEY = SecretStr("the-deployments-next-key-0123456789abcdef-012")
IDENTITY = "vera.identity.v1.IdentityService"
GET_PRINCIPAL = f"/{IDENTITY}/GetPrincipal"


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
    error = await _raw_call(address, (("authorization", stale.header(IDENTITY)),))
    _assert_unauthenticated(error, "expired")


async def test_an_assertion_signed_with_another_key_is_refused(address) -> None:
    error = await _raw_call(address, (("authorization", AssertionSigner(OTHER_KEY, "gateway")
                                       .header(IDENTITY)),))
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
    {"aud": "vera-internal"},  # the one audience every service shared before
    {"aud": "vera.knowledge.v1.KnowledgeService"},  # another service's assertion
    {"aud": None},
    {"iss": "https://auth.vera.example"},
    {"sub": None},
    {"exp": 300},  # longer-lived than any signer mints (seconds from now)
])
async def test_an_assertion_for_another_service_or_without_a_caller_is_refused(
    address, claims
) -> None:
    now = int(time.time())
    # "exp" is given relative to now: the parameters are built when the suite is collected.
    claims = {**claims, "exp": now + claims["exp"]} if "exp" in claims else claims
    payload = {"iss": "vera-internal", "aud": IDENTITY, "sub": "gateway",
               "iat": now, "exp": now + LIFETIME_SECONDS, **claims}
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
    channel = open_channel(address, 5, auth_key=KEY, caller="api")
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
    first = signer.header(IDENTITY)
    now[0] += 30
    assert signer.header(IDENTITY) == first
    now[0] += 15  # within 20 s of expiry: a fresh one
    renewed = signer.header(IDENTITY)
    assert renewed != first
    claims = jwt.decode(renewed.removeprefix("Bearer "), KEY.get_secret_value(),
                        algorithms=["HS256"], audience=IDENTITY,
                        options={"verify_exp": False, "verify_iat": False})
    assert claims["sub"] == "retrieval" and claims["exp"] - claims["iat"] == 60


def test_the_signer_names_each_service_it_calls() -> None:
    signer = AssertionSigner(KEY, "gateway")
    audiences = {
        jwt.decode(signer.header(audience).removeprefix("Bearer "), KEY.get_secret_value(),
                   algorithms=["HS256"], options={"verify_aud": False})["aud"]
        for audience in (IDENTITY, "vera.knowledge.v1.KnowledgeService")}
    assert audiences == {IDENTITY, "vera.knowledge.v1.KnowledgeService"}


def test_a_remembered_assertion_still_expires() -> None:
    now = [1_800_000_000.0]
    signer = AssertionSigner(KEY, "cli", clock=lambda: now[0])
    verifier = AssertionVerifier([KEY], clock=lambda: now[0])
    header = signer.header(IDENTITY)
    assert verifier.verify(header, GET_PRINCIPAL) == "cli"
    now[0] += 75  # past its minute and the clock skew allowed
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(header, GET_PRINCIPAL)
    assert caught.value.metadata["reason"] == "expired"


def test_a_remembered_assertion_serves_only_its_own_service() -> None:
    verifier = AssertionVerifier([KEY])
    header = AssertionSigner(KEY, "api").header(IDENTITY)
    verifier.verify(header, GET_PRINCIPAL)
    with pytest.raises(Unauthenticated) as caught:
        verifier.verify(header, "/vera.knowledge.v1.KnowledgeService/GetFact")
    assert caught.value.metadata["reason"] == "invalid"


# --- which component may call which method ----------------------------------------------


@pytest.mark.parametrize("caller", ["retrieval", "snapshot", "someone", ""])
async def test_a_component_not_allowed_the_method_is_refused(address, caller) -> None:
    """Retrieval and snapshot read knowledge's change log; neither may call identity."""
    now = int(time.time())
    token = jwt.encode({"iss": "vera-internal", "aud": IDENTITY, "sub": caller, "iat": now,
                        "exp": now + LIFETIME_SECONDS}, KEY.get_secret_value(),
                       algorithm="HS256")
    error = await _raw_call(address, (("authorization", f"Bearer {token}"),))
    if not caller:  # no caller at all: not a valid assertion
        _assert_unauthenticated(error, "invalid")
        return
    assert error.code() is grpc.StatusCode.PERMISSION_DENIED
    info = error_info(error)
    assert info.reason == "UNAUTHORIZED"
    assert dict(info.metadata) == {"reason": "caller", "credential": "internal"}


async def test_a_component_refused_a_method_sees_an_internal_fault(address) -> None:
    """Not a forbidden end user: the deployment's wiring is wrong."""
    channel = open_channel(address, 5, auth_key=KEY, caller="retrieval")
    try:
        with pytest.raises(VeraError) as caught:
            await identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
                identity_pb2.GetPrincipalRequest(principal_id="p"))
    finally:
        await channel.close()
    assert not isinstance(caught.value, Unauthorized)
    assert caught.value.reason == "INTERNAL"
    assert caught.value.metadata == {"reason": "caller", "credential": "internal"}


# --- key rotation -------------------------------------------------------------------------


async def _started(settings: Settings) -> tuple[RunningServer, str]:
    running = create_server([_binding()], "127.0.0.1:0", settings)
    await running.server.start()
    return running, f"127.0.0.1:{running.port}"


async def _served(address: str, key: SecretStr) -> bool:
    channel = open_channel(address, 5, auth_key=key, caller="api")
    try:
        await identity_pb2_grpc.IdentityServiceStub(channel).GetPrincipal(
            identity_pb2.GetPrincipalRequest(principal_id="p"))
    except VeraError as exc:
        assert exc.metadata == {"reason": "invalid", "credential": "internal"}
        return False
    finally:
        await channel.close()
    return True


async def test_rotating_the_key_refuses_no_call_at_any_step() -> None:
    """docs/security.md's rotation: (1) add the next key everywhere, (2) swap the two, (3)
    drop the old one. During each rollout a replica on the previous step and one on the
    new step call each other; every call is served, and only after (3) is the old key
    refused."""
    old, new = KEY, NEXT_KEY
    steps = [
        {"auth_key": old},
        {"auth_key": old, "auth_next_key": new},
        {"auth_key": new, "auth_next_key": old},
        {"auth_key": new},
    ]
    for before, after in itertools.pairwise(steps):
        replicas = [await _started(Settings(environment="prod", rpc=rpc))
                    for rpc in (before, after)]
        try:
            for _, address in replicas:
                for signing in (before, after):
                    assert await _served(address, signing["auth_key"]), (before, after)
        finally:
            for running, _ in replicas:
                await running.stop(0)
    running, address = await _started(Settings(environment="prod", rpc=steps[-1]))
    try:
        assert not await _served(address, old)
    finally:
        await running.stop(0)


def test_a_next_key_alone_or_equal_to_the_current_one_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="VERA_RPC__AUTH_NEXT_KEY"):
        load_settings(rpc={"auth_next_key": NEXT_KEY})
    with pytest.raises(ConfigError, match="VERA_RPC__AUTH_NEXT_KEY"):
        load_settings(rpc={"auth_key": KEY, "auth_next_key": KEY})


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
        signed = (("authorization", AssertionSigner(KEY, "cli").header(
            "grpc.reflection.v1alpha.ServerReflection")),)
        assert "vera.identity.v1.IdentityService" in await _list_services(address, signed)
    finally:
        await running.stop(0)
