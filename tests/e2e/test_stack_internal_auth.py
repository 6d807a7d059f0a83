"""`vera up` signs every internal call with a key of its own run: the key file is the
owner's only, unsigned callers are refused, health stays open to probes."""

from __future__ import annotations

import json
import stat
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import SecretStr

from vera.errors import InvalidInput
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel

pytestmark = pytest.mark.e2e


def _run(stack) -> tuple[dict, SecretStr]:
    run = stack.data_dir / "run"
    key_file = run / "rpc.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    return json.loads((run / "stack.json").read_text()), SecretStr(key_file.read_text())


async def test_the_stack_refuses_unsigned_calls_and_serves_signed_ones(stack) -> None:
    info, key = _run(stack)
    identity = info["services"]["identity"]
    async with grpc.aio.insecure_channel(identity) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await identity_pb2_grpc.IdentityServiceStub(channel).ResolveScopes(
                identity_pb2.ResolveScopesRequest(
                    principal_id="00000000-0000-4000-8000-00000000cafe"), timeout=5)
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED

    signed = open_channel(identity, 10, auth_key=key, caller="cli")
    try:  # served: an unknown principal, not an unauthenticated caller
        with pytest.raises(InvalidInput) as unknown:
            await identity_pb2_grpc.IdentityServiceStub(signed).GetPrincipal(
                identity_pb2.GetPrincipalRequest(principal_id=str(uuid.uuid4())))
    finally:
        await signed.close()
    assert unknown.value.field == "principal_id"
