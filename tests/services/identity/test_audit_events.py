"""What identity writes to its audit chain: key minting and revocation with actor and key
id, and authentication failures aggregated per reason and interval (a flood of failures is
one record per reason), never the presented key."""

from __future__ import annotations

import asyncio
import json

import pytest

from vera.config import Settings
from vera.db.pool import create_pool
from vera.errors import InvalidInput, Unauthenticated
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.identity import server

BOGUS = "vera_0123456789abcdef_" + "x" * 43  # well-formed, of no key


async def records(pool) -> list[dict]:
    rows = await pool.fetch("SELECT actor, action, targets FROM audit_log ORDER BY seq")
    return [{"actor": r["actor"], "action": r["action"], "targets": json.loads(r["targets"])
             if isinstance(r["targets"], str) else r["targets"]} for r in rows]


async def test_keys_and_failed_authentications_are_recorded(pg_dsn):
    settings = Settings(database={"dsn": pg_dsn},
                        observability={"audit_head_seconds": 0.2})
    hosted = await server.create(settings, "127.0.0.1:0")
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", deadline_seconds=10)
    stub = identity_pb2_grpc.IdentityServiceStub(channel)
    pool = await create_pool(pg_dsn, server.SCHEMA, min_size=1, max_size=2)
    try:
        user = (await stub.CreateUser(identity_pb2.CreateUserRequest(
            display_name="ops", admin=True))).principal
        minted = await stub.CreateApiKey(identity_pb2.CreateApiKeyRequest(
            principal_id=user.principal_id, label="ci"))
        await stub.RevokeApiKey(identity_pb2.RevokeApiKeyRequest(
            principal_id=user.principal_id, key_id=minted.key.key_id))
        for presented in [BOGUS] * 25 + ["garbage"] * 2 + [minted.api_key]:
            with pytest.raises(Unauthenticated):
                await stub.AuthenticateApiKey(
                    identity_pb2.AuthenticateApiKeyRequest(api_key=presented))
        for _ in range(100):
            found = await records(pool)
            if sum(r["action"] == "authentication.failed" for r in found) >= 3:
                break
            await asyncio.sleep(0.1)
    finally:
        await pool.close()
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()
    pid, key_id = user.principal_id, minted.key.key_id
    assert found[:3] == [
        {"actor": pid, "action": "user.created",
         "targets": {"principal_id": pid, "admin": "true"}},
        {"actor": pid, "action": "api_key.minted", "targets": {"key_id": key_id}},
        {"actor": pid, "action": "api_key.revoked", "targets": {"key_id": key_id}},
    ]
    # One record per reason and interval: 28 failures are at most a few records.
    failures: dict[str, int] = {}
    for record in found[3:]:
        assert record["action"] == "authentication.failed" and record["actor"] == "-"
        reason = record["targets"]["reason"]
        failures[reason] = failures.get(reason, 0) + int(record["targets"]["count"])
    assert failures == {"unknown_key": 25, "malformed": 2, "key_revoked": 1}
    assert len(found) - 3 < 28
    assert minted.api_key not in json.dumps(found) and BOGUS not in json.dumps(found)


async def test_disabling_minting_and_refusals_are_recorded(pg_dsn):
    settings = Settings(database={"dsn": pg_dsn},
                        observability={"audit_head_seconds": 0.2})
    hosted = await server.create(settings, "127.0.0.1:0")
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", deadline_seconds=10)
    stub = identity_pb2_grpc.IdentityServiceStub(channel)
    pool = await create_pool(pg_dsn, server.SCHEMA, min_size=1, max_size=2)
    try:
        admin = (await stub.CreateUser(identity_pb2.CreateUserRequest(
            display_name="ops", admin=True))).principal
        user = (await stub.CreateUser(identity_pb2.CreateUserRequest(
            actor_principal_id=admin.principal_id, display_name="dev"))).principal
        for disabled in (True, True, False):  # the second changes nothing: no record
            await stub.SetUserDisabled(identity_pb2.SetUserDisabledRequest(
                actor_principal_id=admin.principal_id, principal_id=user.principal_id,
                disabled=disabled))
        await stub.RecordMcpTokenMinted(identity_pb2.RecordMcpTokenMintedRequest(
            principal_id=user.principal_id, key_id="0123456789abcdef"))
        with pytest.raises(InvalidInput) as refused:
            await stub.RecordMcpTokenMinted(identity_pb2.RecordMcpTokenMintedRequest(
                principal_id=user.principal_id, key_id="eyJhbGciOi.not-a-key-id"))
        assert refused.value.metadata["field"] == "key_id"
        count = identity_pb2.RefusalCount
        for _ in range(3):  # three intervals of a front become one record per reason
            await stub.RecordRefusals(identity_pb2.RecordRefusalsRequest(
                source="gateway", window_seconds=10, counts=[
                    count(action="authorization.refused", reason="insufficient_scope",
                          count=40),
                    count(action="quota.refused", reason="tool_calls", count=7)]))
        with pytest.raises(InvalidInput) as refused:
            await stub.RecordRefusals(identity_pb2.RecordRefusalsRequest(
                source="gateway", counts=[count(action="user.created", reason="x", count=1)]))
        assert refused.value.metadata["field"] == "counts.action"
        for _ in range(100):
            found = await records(pool)
            if {"authorization.refused", "quota.refused"} <= {r["action"] for r in found}:
                break
            await asyncio.sleep(0.1)
    finally:
        await pool.close()
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()
    aid, uid = admin.principal_id, user.principal_id
    assert found[2:5] == [
        {"actor": aid, "action": "user.disabled", "targets": {"principal_id": uid}},
        {"actor": aid, "action": "user.enabled", "targets": {"principal_id": uid}},
        {"actor": uid, "action": "mcp_token.minted", "targets": {"key_id": "0123456789abcdef"}},
    ]
    refusals = found[5:]
    assert {(r["action"], r["targets"]["reason"], r["targets"]["source"]) for r in refusals} \
        == {("authorization.refused", "insufficient_scope", "gateway"),
            ("quota.refused", "tool_calls", "gateway")}
    totals: dict[str, int] = {}
    for r in refusals:
        totals[r["action"]] = totals.get(r["action"], 0) + int(r["targets"]["count"])
    assert totals == {"authorization.refused": 120, "quota.refused": 21}
    assert len(refusals) <= 4
