"""Several retrieval replicas on one database: one writes the index (the writer lease, a
PostgreSQL advisory lock), the others follow its cursor without embedding anything."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import signal
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import pytest
from retrieval_fakes import FACTS_A, SCOPE_A, Stack, fake_knowledge, make_fact
from test_change_indexer import FakeLog, until, version

from vera.config import Settings
from vera.db.migrate import migrate
from vera.db.pool import create_pool
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.retrieval import server as retrieval_server
from vera.services.retrieval.documents import index as lexical_module
from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.domain import Change, ChangeKind, IndexQuery
from vera.services.retrieval.indexing import indexer as indexer_module
from vera.services.retrieval.indexing import leadership
from vera.services.retrieval.indexing.indexer import ChangeIndexer
from vera.services.retrieval.indexing.leadership import WRITER_LOCK_KEY, PgWriterLease
from vera.services.retrieval.memory.facts import FactMemory
from vera.services.retrieval.ports import WriterFenced
from vera.services.retrieval.vectors.edge import EdgeVectorIndex

EMBEDDING = "minilm-test"
RETRY_SECONDS = 0.2
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class CountingEmbedder:
    """A deterministic unit vector per text; counts what it was asked to embed."""

    dimensions = 3

    def __init__(self) -> None:
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        angles = [zlib.crc32(t.encode()) / 2**32 * math.pi for t in texts]
        return [[math.cos(a), math.sin(a), 0.0] for a in angles]


class RecordingLexical(DocumentIndex):
    """The real adapter, counting the writes only a writer may make."""

    writes = 0

    async def apply(self, facts, position, vectors=None) -> None:
        self.writes += 1
        await super().apply(facts, position, vectors)

    async def delete(self, version_ids) -> None:
        self.writes += 1
        await super().delete(version_ids)

    async def restart_for_embedding(self, embedding) -> None:
        self.writes += 1
        await super().restart_for_embedding(embedding)


class SharedVectors(EdgeVectorIndex):
    """One index every replica reads, as a Qdrant server is; counts who upserts it."""

    upserts = 0

    async def upsert(self, facts, vectors) -> None:
        self.upserts += 1
        await super().upsert(facts, vectors)


@dataclass
class Replica:
    indexer: ChangeIndexer
    embedder: CountingEmbedder
    lexical: RecordingLexical
    vectors: EdgeVectorIndex

    async def finds(self, text: str) -> list[str]:
        hits = await self.lexical.search(text, IndexQuery(scope_ids=("s",), as_of=NOW), 10)
        return [h.version_id for h in hits]


@pytest.fixture
async def replicas(pg_dsn, tmp_path) -> AsyncIterator:
    """Builds replicas over one database and one change log; each has its own memory and
    its own local vector shard, as ``vera up`` processes do."""
    await migrate(pg_dsn, "retrieval", "vera.services.retrieval")
    log = FakeLog()
    closers = []

    async def make(
        *,
        lease: bool = True,
        page_size: int = 256,
        shared: SharedVectors | None = None,
        embedding: str = EMBEDDING,
    ) -> Replica:
        pool = await create_pool(pg_dsn, "retrieval", min_size=1, max_size=2)
        lexical = RecordingLexical(pool, FactMemory(3))
        vectors = shared or await EdgeVectorIndex.open(tmp_path / f"vectors-{len(closers)}", 3)
        writer_lease = PgWriterLease(pg_dsn, retry_seconds=RETRY_SECONDS) if lease else None
        counting = CountingEmbedder()
        indexer = ChangeIndexer(
            log,
            counting,
            vectors,
            lexical,
            embedding=embedding,
            poll_seconds=0.01,
            page_size=page_size,
            lease=writer_lease,
            shared_vectors=shared is not None,
        )

        async def close() -> None:
            if writer_lease is not None:
                await writer_lease.release()
            if shared is None:
                await vectors.close()
            await lexical.close()
            await pool.close()

        closers.append(close)
        return Replica(indexer, counting, lexical, vectors)

    yield log, make
    for close in reversed(closers):
        await close()


def upsert(log: FakeLog, key: str, n: int, obj: str) -> None:
    log.append(ChangeKind.FACT_UPSERTED, dataclasses.replace(version(key, n), object=obj))


def erase(log: FakeLog, version_id: str) -> None:
    log.changes.append(
        Change(len(log.changes) + 1, ChangeKind.FACT_ERASED, erased_version_id=version_id)
    )


async def test_a_follower_applies_only_what_the_writer_stored_with_its_vectors(replicas):
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    upsert(log, "billing", 1, "the ledger squad")
    upsert(log, "search", 1, "the discovery guild")
    writer = await make(lease=False, page_size=2)
    follower = await make(lease=False, page_size=2)

    assert await writer.indexer.step() is False  # positions 1-2 stored
    assert await follower.indexer.follow_step() is False
    assert await follower.finds("platform team") == ["payments-v1"]
    status = await follower.indexer.status()
    assert (status.indexed_position, status.head_position) == (2, 3)

    # Position 3 is not stored yet: the follower waits for the writer's cursor.
    pending = asyncio.create_task(follower.indexer.follow_step())
    await asyncio.sleep(0.3)
    assert not pending.done()
    assert await writer.indexer.step() is True
    assert await asyncio.wait_for(pending, 30) is True
    assert await follower.finds("discovery guild") == ["search-v1"]
    assert (await follower.indexer.status()).indexed_position == 3

    assert follower.embedder.texts == 0 and writer.embedder.texts == 3
    assert follower.lexical.writes == 0
    assert await follower.vectors.count() == 3  # its own shard, from the stored vectors
    stored = await follower.lexical.stored_vectors(["search-v1"])
    [hit] = await follower.vectors.search(stored["search-v1"], IndexQuery(("s",), NOW), 1)
    assert hit.version_id == "search-v1"


async def test_an_erasure_reaches_the_follower_and_an_erased_version_is_never_applied(replicas):
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    upsert(log, "billing", 1, "the ledger squad")
    upsert(log, "leak", 1, "a pasted secret")
    erase(log, "leak-v1")
    writer = await make(lease=False)
    follower = await make(lease=False, page_size=1)

    while not await writer.indexer.step():
        pass
    # The follower reads "leak" upserted at position 3; the writer has erased it since.
    while not await follower.indexer.follow_step():
        pass
    assert await follower.finds("pasted secret") == []
    assert await follower.vectors.count() == 2

    # An erasure of a version the follower holds: gone from its memory and its shard.
    assert await follower.finds("ledger squad") == ["billing-v1"]
    erase(log, "billing-v1")
    assert await writer.indexer.step() is True
    assert await follower.indexer.follow_step() is True
    assert await follower.finds("ledger squad") == []
    assert await follower.finds("platform team") == ["payments-v1"]
    assert await follower.vectors.count() == 1
    assert follower.lexical.writes == 0 and follower.embedder.texts == 0


async def test_a_follower_of_other_vectors_waits_for_its_own_then_replays_them(
    replicas, monkeypatch
):
    """Vectors of another model do not compare with this replica's queries (a rollout that
    changes the model): it applies nothing until a writer stores its model's vectors, then
    takes every version again from the start."""
    monkeypatch.setattr(indexer_module, "OTHER_EMBEDDING_WAIT_SECONDS", 0.0)
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    upsert(log, "billing", 1, "the ledger squad")
    old_writer = await make(lease=False)
    assert await old_writer.indexer.step() is True
    follower = await make(lease=False, embedding="minilm-next")
    assert await follower.indexer.follow_step() is False
    assert follower.indexer.indexed_position == 0
    assert await follower.finds("platform team") == []

    new_writer = await make(lease=False, embedding="minilm-next")
    assert await new_writer.indexer.step() is True  # re-embeds the log from the start
    while not await follower.indexer.follow_step():
        pass
    assert await follower.finds("platform team") == ["payments-v1"]
    assert follower.indexer.indexed_position == 2 and follower.embedder.texts == 0


async def _lock_holder(dsn: str) -> int | None:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid"
            " AND objsubid = 1",
            WRITER_LOCK_KEY,
        )
    finally:
        await conn.close()


async def _documents(dsn: str) -> tuple[list[str], int]:
    conn = await asyncpg.connect(dsn, server_settings={"search_path": "retrieval"})
    try:
        ids = await conn.fetch("SELECT version_id FROM documents ORDER BY version_id")
        return [r["version_id"] for r in ids], await conn.fetchval(
            "SELECT position FROM index_state WHERE id"
        )
    finally:
        await conn.close()


async def test_the_lease_has_one_holder_per_database_until_its_session_ends(pg_dsn, embedded_pg):
    first = PgWriterLease(pg_dsn, retry_seconds=RETRY_SECONDS)
    second = PgWriterLease(pg_dsn, retry_seconds=RETRY_SECONDS)
    admin = await asyncpg.connect(embedded_pg.admin_dsn())
    other_db = "t_lease_other"
    await admin.execute(f'CREATE DATABASE "{other_db}"')
    elsewhere = PgWriterLease(embedded_pg.dsn(other_db), retry_seconds=RETRY_SECONDS)
    try:
        assert await first.acquire() and await first.acquire()  # held: asking again is a no-op
        assert not await second.acquire()
        assert await elsewhere.acquire()  # another deployment's database has its own writer
        await first.release()
        assert await second.acquire()

        lost = asyncio.create_task(second.lost())
        await asyncio.sleep(0.3)
        assert not lost.done()  # probed, still held
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", await _lock_holder(pg_dsn))
        await asyncio.wait_for(lost, 30)
        assert await first.acquire()  # the lock went with the session
    finally:
        for lease in (first, second, elsewhere):
            await lease.release()
        await admin.execute(f'DROP DATABASE IF EXISTS "{other_db}" WITH (FORCE)')
        await admin.close()


async def test_a_writer_whose_session_stops_answering_counts_the_lease_lost(pg_dsn, monkeypatch):
    """A half-open link closes no socket: the held session is probed, and a probe that
    does not answer in time ends the lease (the writer stops writing)."""
    monkeypatch.setattr(leadership, "PROBE_TIMEOUT_SECONDS", 0.3)
    lease = PgWriterLease(pg_dsn, retry_seconds=RETRY_SECONDS)
    assert await lease.acquire()
    backend = await _lock_holder(pg_dsn)
    assert backend is not None
    os.kill(backend, signal.SIGSTOP)
    try:
        await asyncio.wait_for(lease.lost(), 3)
        await lease.release()
    finally:
        os.kill(backend, signal.SIGCONT)


async def test_one_replica_writes_the_other_follows_and_takes_over_when_the_writer_is_cut_off(
    replicas, pg_dsn
):
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    upsert(log, "billing", 1, "the ledger squad")
    first = await make()
    tasks = [asyncio.create_task(first.indexer.run(), name="first")]
    try:
        # Alone (as under `vera up`), the first replica writes at once.
        await until(lambda: first.indexer.indexed_position == 2)
        assert first.indexer.writing and first.embedder.texts == 2
        second = await make()
        tasks.append(asyncio.create_task(second.indexer.run(), name="second"))
        upsert(log, "search", 1, "the discovery guild")
        await until(lambda: second.indexer.indexed_position == 3)
        assert await second.finds("discovery guild") == ["search-v1"]
        assert await second.finds("platform team") == ["payments-v1"]
        assert not second.indexer.writing
        assert second.embedder.texts == 0 and second.lexical.writes == 0
        assert await _documents(pg_dsn) == (["billing-v1", "payments-v1", "search-v1"], 3)

        # The writer's lock session is terminated: it stops writing, the follower takes over
        # from the shared cursor and indexes what comes next.
        holder = await _lock_holder(pg_dsn)
        assert holder is not None
        admin = await asyncpg.connect(pg_dsn)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", holder)
        finally:
            await admin.close()
        await until(lambda: second.indexer.writing)
        assert not first.indexer.writing
        writes_before = first.lexical.writes
        assert await _lock_holder(pg_dsn) not in (None, holder)

        upsert(log, "deploys", 1, "the release train")
        await until(lambda: second.indexer.indexed_position == 4)
        assert second.embedder.texts == 1  # only the new version: nothing embedded twice
        assert (await _documents(pg_dsn))[1] == 4
        await until(lambda: first.indexer.indexed_position == 4)
        assert await first.finds("release train") == ["deploys-v1"]
        assert first.lexical.writes == writes_before and first.embedder.texts == 3
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_promoted_follower_catches_up_from_the_stored_vectors_then_writes(replicas, pg_dsn):
    log, make = replicas
    for key, obj in [
        ("payments", "the platform team"),
        ("billing", "the ledger squad"),
        ("search", "the discovery guild"),
    ]:
        upsert(log, key, 1, obj)
    held = PgWriterLease(pg_dsn, retry_seconds=RETRY_SECONDS)
    assert await held.acquire()  # the writer's lease, while it writes by hand
    writer = await make(lease=False, page_size=2)
    follower = await make(page_size=2)

    assert await writer.indexer.step() is False
    assert await follower.indexer.follow_step() is False  # the follower stands at 2
    assert await writer.indexer.step() is True  # the writer reaches 3, then goes away
    await held.release()

    upsert(log, "deploys", 1, "the release train")
    task = asyncio.create_task(follower.indexer.run())
    try:
        await until(lambda: follower.indexer.indexed_position == 4)
        assert follower.indexer.writing
        assert await follower.finds("discovery guild") == ["search-v1"]
        assert await follower.finds("release train") == ["deploys-v1"]
        assert follower.embedder.texts == 1  # position 3 came from what the writer stored
        assert (await _documents(pg_dsn))[0] == [
            "billing-v1",
            "deploys-v1",
            "payments-v1",
            "search-v1",
        ]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await held.release()


async def test_a_follower_leaves_a_shared_vector_index_to_the_writer(replicas, tmp_path):
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    upsert(log, "leak", 1, "a pasted secret")
    shared = await SharedVectors.open(tmp_path / "shared", 3)
    try:
        writer = await make(lease=False, shared=shared)
        follower = await make(lease=False, shared=shared)
        assert await writer.indexer.step() is True
        assert shared.upserts == 1
        assert await follower.indexer.follow_step() is True
        assert shared.upserts == 1
        assert await follower.finds("platform team") == ["payments-v1"]
        assert (await follower.indexer.status()).indexed_facts == 2

        erase(log, "leak-v1")
        assert await writer.indexer.step() is True
        assert await follower.indexer.follow_step() is True
        assert await follower.finds("pasted secret") == []
        assert await shared.count() == 1 and shared.upserts == 1
    finally:
        await shared.close()


async def test_two_retrieval_services_on_one_database_serve_one_index(pg_dsn, embedder, tmp_path):
    """The wiring as ``vera serve retrieval`` runs it, twice (each with its own data dir and
    qdrant-edge shard): the second serves what the first indexed, and indexes on when the
    first stops."""
    knowledge, fake = await fake_knowledge((SCOPE_A, FACTS_A))
    started = []

    async def start(name: str) -> Stack:
        settings = Settings(
            data_dir=tmp_path / name,
            database={"dsn": pg_dsn},
            services={"knowledge": f"127.0.0.1:{fake.port}"},
            retrieval={"index_poll_seconds": 0.02, "writer_retry_seconds": RETRY_SECONDS},
        )
        hosted = await retrieval_server.create(settings, "127.0.0.1:0", embedder=embedder)
        await hosted.running.server.start()
        channel = open_channel(f"127.0.0.1:{hosted.running.port}", 30.0)
        started.append((hosted, channel))
        return Stack(knowledge, retrieval_pb2_grpc.RetrievalServiceStub(channel))

    async def top_subject(stack: Stack, query: str) -> str:
        response = await stack.retrieval.Search(
            retrieval_pb2.SearchRequest(scope_ids=[SCOPE_A], query=query, limit=3)
        )
        return response.results[0].fact.subject

    try:
        first = await start("first")
        await first.wait_indexed()
        second = await start("second")
        status = await second.wait_indexed()
        assert status.indexed_facts == len(FACTS_A)  # its own shard, filled from stored vectors
        assert await top_subject(second, "which team owns the payments API") == "payments-api"
        assert (await _documents(pg_dsn))[1] == len(FACTS_A)

        hosted, channel = started.pop(0)  # the writer stops; the follower takes over
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()
        knowledge.record(make_fact(SCOPE_A, 99, "release-train", "ships_on", "every Tuesday"))
        await second.wait_indexed()
        assert await top_subject(second, "when does the release train ship") == "release-train"
        assert (await _documents(pg_dsn))[1] == len(FACTS_A) + 1
    finally:
        for hosted, channel in started:
            await channel.close()
            await hosted.running.stop(grace=0)
            await hosted.aclose()
        await fake.stop(grace=0)


async def test_a_replica_that_writes_before_it_ever_followed_catches_up_its_memory(
    replicas, tmp_path
) -> None:
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    upsert(log, "billing", 1, "the ledger squad")
    shared = await SharedVectors.open(tmp_path / "shared", 3)
    try:
        old_writer = await make(lease=False, shared=shared)
        assert await old_writer.indexer.step() is True  # wrote up to 2, then went away
        # Loaded before those writes (loaded_position 0, an empty memory), then won the lease
        # on its first try: it must catch up from the stored vectors before writing.
        late = await make(shared=shared)
        task = asyncio.create_task(late.indexer.run())
        try:
            await until(lambda: late.indexer.writing and late.indexer.indexed_position == 2)
            assert await late.finds("platform team") == ["payments-v1"]
            assert late.embedder.texts == 0
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        await shared.close()


async def test_the_start_up_load_reads_one_snapshot_while_a_writer_moves_rows(
    replicas, monkeypatch
) -> None:
    log, make = replicas
    objects = ["alpha team", "bravo squad", "charlie guild", "delta crew", "echo band"]
    for key, obj in zip("abcde", objects, strict=True):
        upsert(log, key, 1, obj)
    writer = await make(lease=False, page_size=1)
    while not await writer.indexer.step():
        pass
    cursor = await writer.lexical.cursor()
    monkeypatch.setattr(lexical_module, "LOAD_BATCH", 2)
    loader = await make(lease=False)
    original = loader.lexical.worker.run
    calls = 0

    async def run(fn, *args):
        nonlocal calls
        calls += 1
        if calls == 2:  # between two pages, another writer moves a row past the others
            await loader.lexical._pool.execute(
                "UPDATE documents SET change_position = 99 WHERE version_id = 'a-v1'"
            )
        return await original(fn, *args)

    monkeypatch.setattr(loader.lexical.worker, "run", run)
    assert await loader.lexical.load() == cursor
    for obj in objects:
        assert await loader.finds(obj), obj


async def test_a_writer_claimed_over_cannot_commit_a_page_or_touch_the_vectors(
    replicas, tmp_path
) -> None:
    # A database failover: the new primary holds no lock, so another replica takes the
    # lease while the old writer has not noticed. Its next page must not land.
    log, make = replicas
    upsert(log, "payments", 1, "the platform team")
    shared = await SharedVectors.open(tmp_path / "shared", 3)
    try:
        stale = await make(shared=shared)
        await stale.lexical.claim_writer()
        successor = await make(shared=shared)
        await successor.lexical.claim_writer()
        fact = log.changes[0].fact
        with pytest.raises(WriterFenced):
            await stale.lexical.apply([fact], 1, vectors=[[1.0, 0.0, 0.0]])
        assert await stale.lexical.cursor() == 0
        assert await stale.lexical.stored_vectors([fact.version_id]) == {}
        with pytest.raises(WriterFenced):
            await stale.lexical.restart_for_embedding(EMBEDDING)
        # The writer's step asks before it writes vectors it cannot take back.
        stale.indexer.indexed_position = 0
        with pytest.raises(WriterFenced):
            await stale.indexer.step()
        assert shared.upserts == 0 and stale.embedder.texts == 0
        await successor.lexical.apply([fact], 1, vectors=[[1.0, 0.0, 0.0]])
        assert await successor.lexical.cursor() == 1
    finally:
        await shared.close()
