"""Knowledge snapshots and the per-scope pack quota in the snapshot service, over real gRPC
on a fresh database; knowledge's change log is a small gRPC fake."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from vera.config import Settings
from vera.errors import NotFound, QuotaExceeded, Unavailable, VeraError
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.rpc.timestamps import to_timestamp
from vera.services.snapshot import server
from vera.snapshot.v1 import snapshot_pb2 as pb
from vera.snapshot.v1 import snapshot_pb2_grpc


class FakeClock:
    def __init__(self) -> None:
        self.current = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


PRINCIPAL = str(uuid.uuid4())
SCOPE = str(uuid.uuid4())
VERSION = "assembler-1;minilm-l6-v2;index-1"


class ChangeLog(knowledge_pb2_grpc.KnowledgeServiceServicer):
    def __init__(self) -> None:
        self.changes: list[knowledge_pb2.Change] = []
        self.requests: list[knowledge_pb2.ListChangesRequest] = []

    def add(self, key: str, recorded: datetime, scope: str = SCOPE) -> None:
        fact = knowledge_pb2.Fact(
            fact_key=key,
            version_id=f"{key}-v1",
            scope_id=scope,
            state=knowledge_pb2.FACT_STATE_ACTIVE,
            recorded_at=to_timestamp(recorded),
        )
        self.changes.append(
            knowledge_pb2.Change(
                position=len(self.changes) + 1,
                kind=knowledge_pb2.CHANGE_KIND_FACT_UPSERTED,
                fact=fact,
            )
        )

    async def ListChanges(self, request, context):
        self.requests.append(request)
        scopes = set(request.scope_ids)
        after = [
            c
            for c in self.changes
            if c.position > request.after_position and (not scopes or c.fact.scope_id in scopes)
        ]
        return knowledge_pb2.ListChangesResponse(
            changes=after[: request.page_size], head_position=len(self.changes)
        )


async def _service(pg_dsn: str, knowledge_address: str, **snapshot) -> AsyncIterator:
    clock = FakeClock()
    settings = Settings(
        database={"dsn": pg_dsn},
        services={"knowledge": knowledge_address},
        rpc={"deadline_seconds": 2},
        snapshot={"sweep_interval_seconds": 3600, **snapshot},
    )
    hosted = await server.create(settings, "127.0.0.1:0", clock=clock)
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", deadline_seconds=10)
    try:
        yield snapshot_pb2_grpc.SnapshotServiceStub(channel), clock
    finally:
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()


@pytest.fixture
async def log() -> AsyncIterator[tuple[ChangeLog, str]]:
    fake = ChangeLog()
    running = create_server(
        [
            ServiceBinding(
                "vera.knowledge.v1.KnowledgeService",
                fake,
                knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await running.server.start()
    await mark_serving(running)
    yield fake, f"127.0.0.1:{running.port}"
    await running.stop(0)


def create(scope: str = SCOPE, principal: str = PRINCIPAL, version: str = VERSION):
    return pb.CreateSnapshotRequest(
        principal_id=principal, scope_id=scope, assembler_version=version
    )


async def test_freeze_pages_the_whole_change_log(pg_dsn, log):
    fake, address = log
    start = datetime(2029, 1, 1, tzinfo=UTC)
    for i in range(2100):  # more than two pages
        fake.add(f"f{i}", start + timedelta(minutes=i))
    fake.add("late", datetime(2031, 1, 1, tzinfo=UTC))  # after the clock: not frozen
    fake.add("elsewhere", start, scope=str(uuid.uuid4()))
    async for stub, _clock in _service(pg_dsn, address):
        created = (await stub.CreateSnapshot(create())).snapshot
        assert created.fact_count == 2100
        assert created.change_position == 2102
        assert (created.policy_version, created.embedding_version, created.index_version) == (
            "assembler-1",
            "minilm-l6-v2",
            "index-1",
        )
        got = await stub.GetSnapshot(
            pb.GetSnapshotRequest(principal_id=PRINCIPAL, snapshot_id=created.snapshot_id)
        )
        assert got.snapshot == created


async def test_freeze_reads_only_its_own_scopes_changes(pg_dsn, log):
    fake, address = log
    start = datetime(2029, 1, 1, tzinfo=UTC)
    for i in range(5000):  # another tenant's busy log: five pages if read whole
        fake.add(f"theirs-{i}", start, scope=str(uuid.uuid4()))
    for i in range(3):
        fake.add(f"mine-{i}", start + timedelta(minutes=i))
    async for stub, _clock in _service(pg_dsn, address):
        created = (await stub.CreateSnapshot(create())).snapshot
    assert created.fact_count == 3
    assert created.change_position == len(fake.changes)
    assert len(fake.requests) == 1
    assert [list(r.scope_ids) for r in fake.requests] == [[SCOPE]]


async def test_foreign_missing_and_malformed_snapshots_are_not_found(pg_dsn, log):
    _fake, address = log
    async for stub, _clock in _service(pg_dsn, address):
        created = (await stub.CreateSnapshot(create())).snapshot
        assert created.fact_count == 0
        for principal, sid in (
            (str(uuid.uuid4()), created.snapshot_id),
            (PRINCIPAL, str(uuid.uuid4())),
            (PRINCIPAL, "nope"),
        ):
            with pytest.raises(NotFound):
                await stub.GetSnapshot(
                    pb.GetSnapshotRequest(principal_id=principal, snapshot_id=sid)
                )


async def test_bad_create_requests_are_invalid_input(pg_dsn, log):
    _fake, address = log
    async for stub, _clock in _service(pg_dsn, address):
        for request, field in (
            (create(version=""), "assembler_version"),
            (create(scope="acme"), "scope_id"),
            (create(principal="me"), "principal_id"),
        ):
            with pytest.raises(VeraError) as caught:
                await stub.CreateSnapshot(request)
            assert caught.value.reason == "INVALID_INPUT"
            assert caught.value.metadata["field"] == field


async def test_unreachable_knowledge_stores_nothing(pg_dsn):
    async for stub, _clock in _service(pg_dsn, "127.0.0.1:1"):
        with pytest.raises(Unavailable):
            await stub.CreateSnapshot(create())


async def test_pack_quota_is_per_scope_and_counts_live_packs_only(pg_dsn, log):
    _fake, address = log
    async for stub, clock in _service(pg_dsn, address, pack_quota_bytes_per_scope=300):

        def pack(text: str, scope: str = SCOPE) -> pb.CreateContextPackRequest:
            return pb.CreateContextPackRequest(
                principal_id=PRINCIPAL,
                scope_id=scope,
                canonical_request_json=json.dumps({"query": text}),
                content_json=json.dumps({"results": []}),
                assembler_version="1",
            )

        await stub.CreateContextPack(pack("a" * 100))
        deduplicated = await stub.CreateContextPack(pack("a" * 100))
        assert deduplicated.deduplicated
        with pytest.raises(QuotaExceeded) as caught:
            await stub.CreateContextPack(pack("b" * 200))
        assert caught.value.metadata["bucket"] == "context_pack_storage"
        await stub.CreateContextPack(pack("b" * 200, scope=str(uuid.uuid4())))
        clock.advance(timedelta(days=30))
        await stub.CreateContextPack(pack("b" * 200))


def test_a_version_counts_by_its_interval_not_by_todays_state():
    from vera.services.snapshot.fact_log import _counts

    known = datetime(2030, 1, 1, tzinfo=UTC)

    def version(state, recorded, superseded=None, **valid) -> knowledge_pb2.Fact:
        fact = knowledge_pb2.Fact(state=state, recorded_at=to_timestamp(recorded))
        if superseded is not None:
            fact.superseded_at.CopyFrom(to_timestamp(superseded))
        for name, value in valid.items():
            getattr(fact, name).CopyFrom(to_timestamp(value))
        return fact

    hour = timedelta(hours=1)
    s = knowledge_pb2
    # Superseded only after the freeze (a race while paging): it was live at known_as_of.
    assert _counts(version(s.FACT_STATE_SUPERSEDED, known - hour, known + hour), known, known)
    assert not _counts(version(s.FACT_STATE_SUPERSEDED, known - hour, known), known, known)
    assert not _counts(version(s.FACT_STATE_ACTIVE, known + hour), known, known)
    assert not _counts(version(s.FACT_STATE_RETRACTED, known - hour), known, known)
    assert _counts(version(s.FACT_STATE_PROPOSED, known - hour), known, known)
    assert _counts(version(s.FACT_STATE_DISPUTED, known - hour), known, known)
    future = version(s.FACT_STATE_ACTIVE, known - hour, valid_from=known + hour)
    assert not _counts(future, known, known)
    assert _counts(future, known + 2 * hour, known)
    ended = version(s.FACT_STATE_ACTIVE, known - hour, valid_to=known)
    assert not _counts(ended, known, known)
    assert _counts(ended, known - hour, known)
