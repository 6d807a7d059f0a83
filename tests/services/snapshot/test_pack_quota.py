"""The context-pack storage quotas (per scope and per principal) and their running byte
counters, over real gRPC on a fresh database."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from vera.errors import QuotaExceeded, VeraError
from vera.services.snapshot.erasure import PgPrincipalErasure
from vera.services.snapshot.store import sweep_expired
from vera.snapshot.v1 import snapshot_pb2 as pb

SCOPE = str(uuid.uuid4())
ALICE = str(uuid.uuid4())
BOB = str(uuid.uuid4())
# One pack below is 115 bytes of stored JSON; three fit a principal, four do not.
PER_PRINCIPAL = 400
PER_SCOPE = 10_000


def pack(principal: str, text: str, scope: str = SCOPE, **extra) -> pb.CreateContextPackRequest:
    return pb.CreateContextPackRequest(
        principal_id=principal,
        scope_id=scope,
        canonical_request_json=json.dumps({"query": text.ljust(80, ".")}),
        content_json=json.dumps({"results": []}),
        assembler_version="1",
        **extra,
    )


@pytest.fixture
async def quota(snapshot_with) -> AsyncIterator:
    async for harness in snapshot_with(
        pack_quota_bytes_per_principal=PER_PRINCIPAL, pack_quota_bytes_per_scope=PER_SCOPE
    ):
        yield harness


async def counters(snapshot) -> tuple[dict[str, int], dict[str, int]]:
    """The running counters next to what the live rows actually hold."""
    running = {
        str(r["principal_id"]): r["stored_bytes"]
        for r in await snapshot.pool.fetch("SELECT * FROM principal_pack_storage")
    } | {
        str(r["scope_id"]): r["stored_bytes"]
        for r in await snapshot.pool.fetch("SELECT * FROM scope_pack_storage")
    }
    actual: dict[str, int] = {}
    for r in await snapshot.pool.fetch(
        "SELECT principal_id, scope_id, stored_bytes FROM context_packs"
    ):
        for owner in (str(r["principal_id"]), str(r["scope_id"])):
            actual[owner] = actual.get(owner, 0) + r["stored_bytes"]
    return running, actual


def nonzero(values: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in values.items() if v}


async def test_one_principal_over_its_quota_leaves_the_project_to_the_others(quota):
    for i in range(3):
        await quota.stub.CreateContextPack(pack(ALICE, f"alice {i}"))
    with pytest.raises(QuotaExceeded) as caught:
        await quota.stub.CreateContextPack(pack(ALICE, "alice 3"))
    assert caught.value.metadata["bucket"] == "context_pack_storage"
    # A retry of a stored pack deduplicates: it costs nothing, so it is never refused.
    again = await quota.stub.CreateContextPack(pack(ALICE, "alice 0"))
    assert again.deduplicated
    # Another member of the same project still persists.
    created = await quota.stub.CreateContextPack(pack(BOB, "bob 0"))
    assert not created.deduplicated
    running, actual = await counters(quota)
    assert running == actual
    assert running[SCOPE] == running[ALICE] + running[BOB]


async def test_the_project_quota_still_bounds_the_scope(snapshot_with):
    async for snapshot in snapshot_with(
        pack_quota_bytes_per_principal=PER_SCOPE, pack_quota_bytes_per_scope=PER_PRINCIPAL
    ):
        for i in range(3):
            await snapshot.stub.CreateContextPack(pack(str(uuid.uuid4()), f"member {i}"))
        with pytest.raises(QuotaExceeded):
            await snapshot.stub.CreateContextPack(pack(str(uuid.uuid4()), "one too many"))
        await snapshot.stub.CreateContextPack(pack(ALICE, "elsewhere", scope=str(uuid.uuid4())))


async def test_counters_stay_exact_across_persist_sweep_and_erasure(quota):
    other_scope = str(uuid.uuid4())
    await quota.stub.CreateContextPack(pack(ALICE, "a0"))
    await quota.stub.CreateContextPack(pack(ALICE, "a1", scope=other_scope))
    await quota.stub.CreateContextPack(pack(BOB, "b0"))
    running, actual = await counters(quota)
    assert running == actual and len(nonzero(running)) == 4

    quota.clock.advance(timedelta(days=20))
    await quota.stub.CreateContextPack(pack(ALICE, "a2"))
    quota.clock.advance(timedelta(days=11))  # the first three expired; a2 is live
    assert await sweep_expired(quota.pool, quota.clock.current) == 3
    running, actual = await counters(quota)
    assert nonzero(running) == actual
    assert set(actual) == {ALICE, SCOPE}

    await quota.stub.CreateContextPack(pack(BOB, "b1"))
    counts = await PgPrincipalErasure(quota.pool).erase(ALICE)
    assert counts["context_packs"] == 1
    running, actual = await counters(quota)
    assert nonzero(running) == actual
    assert set(actual) == {BOB, SCOPE}
    # Erasure leaves no counter naming the erased principal.
    assert ALICE not in running


async def test_expired_packs_stop_counting_even_before_the_sweeper_runs(quota):
    for i in range(3):
        await quota.stub.CreateContextPack(pack(ALICE, f"alice {i}"))
    quota.clock.advance(timedelta(days=30))
    await quota.stub.CreateContextPack(pack(ALICE, "alice 3"))
    running, actual = await counters(quota)
    assert nonzero(running) == actual
    assert await quota.pool.fetchval("SELECT count(*) FROM context_packs") == 1


async def test_concurrent_persists_never_pass_the_quota(quota):
    outcomes = await asyncio.gather(
        *(quota.stub.CreateContextPack(pack(ALICE, f"burst {i}")) for i in range(12)),
        return_exceptions=True,
    )
    stored = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, QuotaExceeded)]
    assert len(stored) == 3 and len(refused) == 9
    running, actual = await counters(quota)
    assert running == actual
    assert running[ALICE] <= PER_PRINCIPAL


async def test_usage_ref_is_recorded_and_never_splits_deduplication(quota):
    first = await quota.stub.CreateContextPack(pack(ALICE, "shared", usage_ref="job-1"))
    second = await quota.stub.CreateContextPack(pack(ALICE, "shared", usage_ref="job-2"))
    third = await quota.stub.CreateContextPack(pack(ALICE, "shared"))
    assert second.deduplicated and third.deduplicated
    assert first.pack.pack_id == second.pack.pack_id == third.pack.pack_id
    assert await quota.pool.fetchval("SELECT count(*) FROM context_packs") == 1
    rows = await quota.pool.fetch(
        "SELECT pack_id::text AS pack_id, usage_ref FROM context_pack_usage ORDER BY usage_ref"
    )
    assert [(r["pack_id"], r["usage_ref"]) for r in rows] == [
        (first.pack.pack_id, "job-1"),
        (first.pack.pack_id, "job-2"),
    ]
    # Usage goes with its pack.
    await PgPrincipalErasure(quota.pool).erase(ALICE)
    assert await quota.pool.fetchval("SELECT count(*) FROM context_pack_usage") == 0


async def test_an_overlong_usage_ref_is_invalid_input(quota):
    with pytest.raises(VeraError) as caught:
        await quota.stub.CreateContextPack(pack(ALICE, "x", usage_ref="u" * 513))
    assert caught.value.reason == "INVALID_INPUT"
    assert caught.value.metadata["field"] == "usage_ref"
