"""Idempotency keys in the snapshot service, over real gRPC on a fresh database."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from vera.errors import InvalidInput
from vera.services.snapshot.store import sweep_expired
from vera.snapshot.v1 import snapshot_pb2 as pb

PRINCIPAL = str(uuid.uuid4())
OTHER = str(uuid.uuid4())


async def begin(snapshot, key="k", digest="h1", principal=PRINCIPAL):
    return await snapshot.stub.BeginIdempotentCall(
        pb.BeginIdempotentCallRequest(principal_id=principal, key=key, request_hash=digest)
    )


async def complete(snapshot, result='{"ok":1}', key="k", digest="h1", principal=PRINCIPAL):
    await snapshot.stub.CompleteIdempotentCall(
        pb.CompleteIdempotentCallRequest(
            principal_id=principal, key=key, request_hash=digest, result_json=result
        )
    )


async def test_claim_complete_replay_and_mismatch(snapshot):
    assert (await begin(snapshot)).state == pb.IDEMPOTENCY_STATE_CLAIMED
    assert (await begin(snapshot)).state == pb.IDEMPOTENCY_STATE_IN_PROGRESS
    await complete(snapshot)
    replay = await begin(snapshot)
    assert (replay.state, replay.result_json) == (pb.IDEMPOTENCY_STATE_COMPLETED, '{"ok":1}')
    assert (await begin(snapshot, digest="h2")).state == pb.IDEMPOTENCY_STATE_MISMATCH
    # A completed key is never overwritten by a late second completion.
    await complete(snapshot, result='{"ok":2}')
    assert (await begin(snapshot)).result_json == '{"ok":1}'


async def test_keys_are_per_principal(snapshot):
    assert (await begin(snapshot)).state == pb.IDEMPOTENCY_STATE_CLAIMED
    assert (await begin(snapshot, digest="h2", principal=OTHER)).state == (
        pb.IDEMPOTENCY_STATE_CLAIMED
    )


async def test_release_frees_a_claim_but_never_a_result(snapshot):
    await begin(snapshot)
    release = pb.ReleaseIdempotentCallRequest(principal_id=PRINCIPAL, key="k", request_hash="h1")
    await snapshot.stub.ReleaseIdempotentCall(release)
    assert (await begin(snapshot, digest="h2")).state == pb.IDEMPOTENCY_STATE_CLAIMED
    await complete(snapshot, digest="h2")
    await snapshot.stub.ReleaseIdempotentCall(
        pb.ReleaseIdempotentCallRequest(principal_id=PRINCIPAL, key="k", request_hash="h2")
    )
    assert (await begin(snapshot, digest="h2")).state == pb.IDEMPOTENCY_STATE_COMPLETED


async def test_an_abandoned_claim_lapses_and_a_result_expires(snapshot):
    await begin(snapshot)
    snapshot.clock.advance(timedelta(minutes=3))  # past the 120 s claim
    assert (await begin(snapshot, digest="h2")).state == pb.IDEMPOTENCY_STATE_CLAIMED
    await complete(snapshot, digest="h2")
    snapshot.clock.advance(timedelta(hours=23))
    assert (await begin(snapshot, digest="h2")).state == pb.IDEMPOTENCY_STATE_COMPLETED
    snapshot.clock.advance(timedelta(hours=2))  # past the 24 h TTL
    await sweep_expired(snapshot.pool, snapshot.clock())
    assert await snapshot.pool.fetchval("SELECT count(*) FROM idempotency_keys") == 0
    assert (await begin(snapshot, digest="h3")).state == pb.IDEMPOTENCY_STATE_CLAIMED


async def test_concurrent_first_uses_claim_once(snapshot):
    states = await asyncio.gather(*(begin(snapshot) for _ in range(8)))
    claimed = [s for s in states if s.state == pb.IDEMPOTENCY_STATE_CLAIMED]
    assert len(claimed) == 1


@pytest.mark.parametrize(
    ("key", "digest", "principal", "field"),
    [
        ("", "h", PRINCIPAL, "idempotency_key"),
        ("k" * 256, "h", PRINCIPAL, "idempotency_key"),
        ("a b", "h", PRINCIPAL, "idempotency_key"),
        ("k", "", PRINCIPAL, "request_hash"),
        ("k", "h", "nope", "principal_id"),
    ],
)
async def test_bad_requests_are_invalid_input(snapshot, key, digest, principal, field):
    with pytest.raises(InvalidInput) as caught:
        await begin(snapshot, key=key, digest=digest, principal=principal)
    assert caught.value.metadata["field"] == field
