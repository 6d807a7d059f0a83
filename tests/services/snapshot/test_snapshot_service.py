from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import pytest

from vera.config import ConfigError, Settings
from vera.errors import ExpiredContextPack, InvalidInput
from vera.services.snapshot import server
from vera.services.snapshot.store import sweep_expired
from vera.snapshot.v1 import snapshot_pb2 as pb

PRINCIPAL = str(uuid.uuid4())
OTHER = str(uuid.uuid4())
SCOPE = str(uuid.uuid4())
TTL = timedelta(days=30)


REQUEST = {"task": "fix the retry loop", "project": "payments", "max_tokens": 2000}
CONTENT = {
    "results": [{"fact_id": "f1", "rank": 1, "citations": ["s1"]}],
    "conflicts": [],
    "omitted": 0,
    "token_estimate": 120,
}


def create_request(**overrides) -> pb.CreateContextPackRequest:
    fields = {
        "principal_id": PRINCIPAL,
        "scope_id": SCOPE,
        "canonical_request_json": json.dumps(REQUEST),
        "content_json": json.dumps(CONTENT),
        "assembler_version": "1",
    }
    fields.update(overrides)
    return pb.CreateContextPackRequest(**fields)


async def get(snapshot, pack_id: str, principal_id: str = PRINCIPAL) -> pb.ContextPack:
    response = await snapshot.stub.GetContextPack(
        pb.GetContextPackRequest(principal_id=principal_id, pack_id=pack_id)
    )
    return response.pack


async def count_rows(snapshot) -> int:
    return await snapshot.pool.fetchval("SELECT count(*) FROM context_packs")


async def test_create_requires_a_dsn() -> None:
    with pytest.raises(ConfigError, match="VERA_DATABASE__DSN"):
        await server.create(Settings(database={"dsn": None}), "127.0.0.1:0")


async def test_a_pack_whose_query_carries_a_credential_is_not_stored(snapshot) -> None:
    token = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"
    request = {**REQUEST, "query": f"why does the deploy fail with {token}"}
    with pytest.raises(InvalidInput) as refused:
        await snapshot.stub.CreateContextPack(
            create_request(canonical_request_json=json.dumps(request))
        )
    assert (refused.value.field, refused.value.metadata["reason"]) == ("query", "secret")
    assert await count_rows(snapshot) == 0
    ordinary = {**REQUEST, "query": "why does the deploy fail?"}
    await snapshot.stub.CreateContextPack(
        create_request(canonical_request_json=json.dumps(ordinary))
    )
    assert await count_rows(snapshot) == 1


async def test_create_and_get(snapshot) -> None:
    created = await snapshot.stub.CreateContextPack(create_request())
    pack = created.pack
    assert created.deduplicated is False
    assert uuid.UUID(pack.pack_id)
    assert pack.scope_id == SCOPE
    assert pack.assembler_version == "1"
    assert pack.created_at.ToDatetime(tzinfo=snapshot.clock.current.tzinfo) == (
        snapshot.clock.current
    )
    assert pack.expires_at.ToDatetime() - pack.created_at.ToDatetime() == TTL
    # JSON both ways: integral numbers come back as integers, not as doubles.
    assert json.loads(pack.canonical_request_json) == REQUEST
    assert json.loads(pack.content_json) == CONTENT
    assert '"max_tokens": 2000' in pack.canonical_request_json

    assert await get(snapshot, pack.pack_id) == pack


async def test_identical_create_deduplicates(snapshot) -> None:
    first = await snapshot.stub.CreateContextPack(create_request())
    snapshot.clock.advance(timedelta(hours=1))
    # same request and content with keys in another order: same canonical JSON
    reordered = create_request(
        canonical_request_json=json.dumps(dict(reversed(list(REQUEST.items())))),
        content_json=json.dumps(dict(reversed(list(CONTENT.items())))),
    )
    second = await snapshot.stub.CreateContextPack(reordered)
    assert second.deduplicated is True
    assert second.pack == first.pack
    assert await count_rows(snapshot) == 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"principal_id": OTHER},
        {"scope_id": str(uuid.uuid4())},
        {"assembler_version": "2"},
        {"canonical_request_json": json.dumps({**REQUEST, "max_tokens": 1000})},
        {"content_json": json.dumps({**CONTENT, "omitted": 1})},
    ],
)
async def test_any_difference_stores_a_new_pack(snapshot, overrides) -> None:
    first = await snapshot.stub.CreateContextPack(create_request())
    second = await snapshot.stub.CreateContextPack(create_request(**overrides))
    assert second.deduplicated is False
    assert second.pack.pack_id != first.pack.pack_id


async def test_concurrent_identical_creates_store_one_pack(snapshot) -> None:
    responses = await asyncio.gather(
        *(snapshot.stub.CreateContextPack(create_request()) for _ in range(8))
    )
    assert len({r.pack.pack_id for r in responses}) == 1
    assert sum(not r.deduplicated for r in responses) == 1
    assert await count_rows(snapshot) == 1


async def test_an_expired_pack_is_not_a_dedupe_target(snapshot) -> None:
    first = await snapshot.stub.CreateContextPack(create_request())
    snapshot.clock.advance(TTL)
    second = await snapshot.stub.CreateContextPack(create_request())
    assert second.deduplicated is False
    assert second.pack.pack_id != first.pack.pack_id


async def test_another_principal_reads_expired_context_pack(snapshot) -> None:
    created = await snapshot.stub.CreateContextPack(create_request())
    with pytest.raises(ExpiredContextPack) as exc:
        await get(snapshot, created.pack.pack_id, principal_id=OTHER)
    assert exc.value.reason == "EXPIRED_CONTEXT_PACK"
    assert exc.value.metadata == {}


@pytest.mark.parametrize("pack_id", ["", "not-a-uuid", str(uuid.uuid4())])
async def test_missing_or_malformed_pack_reads_expired_context_pack(snapshot, pack_id) -> None:
    with pytest.raises(ExpiredContextPack) as exc:
        await get(snapshot, pack_id)
    assert exc.value.reason == "EXPIRED_CONTEXT_PACK"
    assert exc.value.metadata == {}


async def test_pack_expires_after_its_ttl(snapshot) -> None:
    created = await snapshot.stub.CreateContextPack(create_request())
    snapshot.clock.advance(TTL - timedelta(seconds=1))
    assert (await get(snapshot, created.pack.pack_id)).pack_id == created.pack.pack_id

    snapshot.clock.advance(timedelta(seconds=1))
    with pytest.raises(ExpiredContextPack) as exc:
        await get(snapshot, created.pack.pack_id)
    assert exc.value.metadata == {}


@pytest.mark.parametrize(
    ("overrides", "metadata"),
    [
        ({"principal_id": "nope"}, {"field": "principal_id", "reason": "malformed"}),
        ({"scope_id": ""}, {"field": "scope_id", "reason": "required"}),
        ({"assembler_version": ""}, {"field": "assembler_version"}),
        ({"assembler_version": "v" * 65}, {"field": "assembler_version"}),
        # The pack parts are JSON objects (stored as sent, hashed, never read inside).
        ({"canonical_request_json": ""}, {"field": "canonical_request_json"}),
        ({"canonical_request_json": "{not json"}, {"field": "canonical_request_json"}),
        ({"canonical_request_json": "[1, 2]"}, {"field": "canonical_request_json"}),
        ({"content_json": '"results"'}, {"field": "content_json"}),
    ],
)
async def test_create_validates_input(snapshot, overrides, metadata) -> None:
    with pytest.raises(InvalidInput) as exc:
        await snapshot.stub.CreateContextPack(create_request(**overrides))
    assert exc.value.metadata == metadata


async def test_sweep_deletes_only_expired_rows(snapshot) -> None:
    old = await snapshot.stub.CreateContextPack(create_request())
    snapshot.clock.advance(timedelta(days=10))
    young = await snapshot.stub.CreateContextPack(create_request(assembler_version="2"))

    assert await sweep_expired(snapshot.pool, snapshot.clock.current) == 0
    snapshot.clock.advance(TTL - timedelta(days=10))
    assert await sweep_expired(snapshot.pool, snapshot.clock.current) == 1

    ids = {
        str(r["pack_id"]) for r in await snapshot.pool.fetch("SELECT pack_id FROM context_packs")
    }
    assert ids == {young.pack.pack_id}
    assert old.pack.pack_id not in ids


async def test_background_sweeper_physically_deletes_expired_packs(fast_sweeping_snapshot) -> None:
    snapshot = fast_sweeping_snapshot
    await snapshot.stub.CreateContextPack(create_request())
    await asyncio.sleep(0.1)
    assert await count_rows(snapshot) == 1

    snapshot.clock.advance(TTL)
    async with asyncio.timeout(30):  # the next sweep deletes it
        while True:
            if await count_rows(snapshot) == 0:
                break
            await asyncio.sleep(0.02)
