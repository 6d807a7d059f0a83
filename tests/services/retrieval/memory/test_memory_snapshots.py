"""A replica's memory snapshot: reused only under the documents, embedding and format it
was made from, and then (with the rows written after it) equal to a full refill; an
erasure, a re-embedding, a cursor gone back or an unreadable file means a full refill
(real PostgreSQL for the service's load; the file on its own for the format)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import subprocess
import threading
from collections.abc import AsyncIterator, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from vera.config import ConfigError, load_settings
from vera.db.migrate import migrate
from vera.db.pool import create_pool
from vera.services.retrieval import server as retrieval_server
from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.domain import Citation, Fact, FactState, IndexQuery
from vera.services.retrieval.memory import snapshot_shared as shared_snapshot
from vera.services.retrieval.memory.facts import FactMemory
from vera.services.retrieval.memory.snapshot_file import MemorySnapshot, SnapshotKey
from vera.services.retrieval.memory.snapshot_shared import SharedSnapshot

T = datetime(2025, 1, 1, tzinfo=UTC)
EMBEDDING = "test-embedding-1"
KEY = SnapshotKey("epoch-1", EMBEDDING, 3)


def fact(n: int, text: str, source: str = "s1") -> Fact:
    return Fact(
        f"k{n}", f"k{n}-v1", "a", f"subject {n}", "said", text, recorded_at=T,
        citations=(Citation(source_id=source, locator=f"D1:{n}", excerpt=text),),
    )  # fmt: skip


def vector(n: int) -> list[float]:
    return [math.cos(n), math.sin(n), 0.5]


FIRST = [fact(n, t) for n, t in enumerate(
    ["payments api owned by checkout", "ledger runbook for outages", "on call rotation"], 1)]
LATER = [fact(n, t, "s2") for n, t in enumerate(
    ["payments ledger migration", "the checkout team on call", "ledger owners"], 10)]
QUERIES = ["payments", "ledger on call", "checkout owners", "rotation runbook"]


def query() -> IndexQuery:
    return IndexQuery(scope_ids=("a",), as_of=T + timedelta(days=1))


async def answers(index: DocumentIndex) -> list:
    out = []
    for text in QUERIES:
        found = await index.search(text, query(), 10)
        features = await index.features(("a",), [c.version_id for c in found], vector(0), text)
        out.append(([(c.version_id, c.score) for c in found], sorted(features.items())))
    return out


@pytest.fixture
async def pool(pg_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    await migrate(pg_dsn, "retrieval", "vera.services.retrieval")
    pool = await create_pool(pg_dsn, "retrieval", min_size=1, max_size=3)
    await pool.execute("UPDATE index_state SET position = 0, embedding = $1", EMBEDDING)
    yield pool
    await pool.close()


async def apply(pool: asyncpg.Pool, facts: list[Fact], first_position: int) -> None:
    writer = DocumentIndex(pool)  # the documents and the cursor, as the tailer writes them
    for position, f in enumerate(facts, start=first_position):
        await writer.apply([f], position, vectors=[vector(int(f.fact_key[1:]))])


async def loaded(pool: asyncpg.Pool, path: Path | None) -> DocumentIndex:
    snapshot = MemorySnapshot(path, EMBEDDING) if path is not None else None
    index = DocumentIndex(pool, FactMemory(3), snapshot=snapshot)
    await index.load()
    return index


async def test_a_restart_reuses_the_snapshot_and_reads_only_the_rows_written_since(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    path = tmp_path / "facts.snapshot"
    await apply(pool, FIRST, 1)
    first = await loaded(pool, path)
    assert first.loaded_from == "documents" and path.exists()  # a full refill leaves one
    await first.close()
    await apply(pool, LATER, 4)

    again = await loaded(pool, path)
    refilled = await loaded(pool, None)
    assert again.loaded_from == "snapshot" and refilled.loaded_from == "documents"
    assert await answers(again) == await answers(refilled)
    found = [c.version_id for c in await again.search("ledger", query(), 10)]
    assert {"k10-v1", "k12-v1"} <= set(found[:3])  # written after the snapshot
    for index in (again, refilled):
        await index.close()


async def test_a_stop_leaves_a_snapshot_of_what_it_applied_since_the_start(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    path = tmp_path / "facts.snapshot"
    await apply(pool, FIRST, 1)
    index = await loaded(pool, path)
    await index.apply(LATER, 6, vectors=[vector(n) for n in (10, 11, 12)])
    await index.close()
    assert MemorySnapshot(path, EMBEDDING).read(
        SnapshotKey(await epoch(pool), EMBEDDING, 3), cursor=6
    )[1] == 6  # fmt: skip
    # No row is written past that position since, so the snapshot alone answers as a full
    # refill does.
    again = await loaded(pool, path)
    assert again.loaded_from == "snapshot"
    refilled = await loaded(pool, None)
    assert await answers(again) == await answers(refilled)
    for i in (again, refilled):
        await i.close()


async def epoch(pool: asyncpg.Pool) -> str:
    return str(await pool.fetchval("SELECT documents_epoch FROM index_state WHERE id"))


async def test_an_erasure_makes_the_next_start_refill(pool: asyncpg.Pool, tmp_path: Path) -> None:
    path = tmp_path / "facts.snapshot"
    await apply(pool, FIRST + LATER, 1)
    reader = await loaded(pool, path)  # another replica, loaded before the erasure
    writer = await loaded(pool, None)
    before = await epoch(pool)
    await writer.delete(["k2-v1"])
    assert await epoch(pool) != before
    written = path.stat().st_mtime_ns
    await reader.close()  # its memory still holds k2: it must not leave it behind
    assert path.stat().st_mtime_ns == written

    again = await loaded(pool, path)
    assert again.loaded_from == "documents"
    assert "k2-v1" not in {c.version_id for c in await again.search("ledger", query(), 10)}
    for i in (again, writer):
        await i.close()


async def test_a_re_embedding_or_a_cursor_gone_back_makes_the_next_start_refill(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    path = tmp_path / "facts.snapshot"
    await apply(pool, FIRST, 1)
    await (await loaded(pool, path)).close()

    # The database restored from a backup older than the snapshot: its position is ahead.
    await pool.execute("UPDATE index_state SET position = 2")
    assert await loaded_from(pool, path) == "documents"
    await apply(pool, FIRST, 3)  # the cursor past the (new) snapshot's position again

    index = await loaded(pool, path)
    assert index.loaded_from == "snapshot"
    await index.restart_for_embedding(EMBEDDING)  # a replay from the start, same model
    await index.close()
    assert await loaded_from(pool, path) == "documents"

    # Vectors of another model: neither used nor made.
    await pool.execute("UPDATE index_state SET embedding = 'other-model'")
    path.unlink(missing_ok=True)
    other = await loaded(pool, path)
    assert other.loaded_from == "documents" and not path.exists()
    await other.close()
    assert not path.exists()


async def loaded_from(pool: asyncpg.Pool, path: Path) -> str:
    index = await loaded(pool, path)
    await index.close()
    return index.loaded_from


def test_only_a_snapshot_of_the_same_key_format_and_an_earlier_position_is_read(
    tmp_path: Path,
) -> None:
    """A file that does not fit is deleted at once (the refill writes a new one)."""
    path = tmp_path / "facts.snapshot"
    snapshot = MemorySnapshot(path, EMBEDDING)
    assert snapshot.read(KEY, cursor=10) is None  # none yet
    memory = FactMemory(3)
    memory.upsert(FIRST, [vector(n) for n in (1, 2, 3)], 1)
    snapshot.write(memory, KEY, 5)
    assert snapshot.read(KEY, cursor=5) is not None
    for other, cursor in (
        (KEY, 4),
        (SnapshotKey("epoch-2", EMBEDDING, 3), 10),
        (SnapshotKey("epoch-1", "another-model", 3), 10),
        (SnapshotKey("epoch-1", EMBEDDING, 384), 10),
    ):
        snapshot.write(memory, KEY, 5)
        assert snapshot.read(other, cursor=cursor) is None
        assert not path.exists()
    snapshot.write(memory, KEY, 5)
    assert snapshot.key("epoch-1", "another-model", 3) is None
    assert snapshot.key("epoch-1", None, 3) is None
    assert snapshot.key("epoch-1", EMBEDDING, 3) == KEY
    assert [p.name for p in tmp_path.iterdir()] == ["facts.snapshot"]  # no partial left


@pytest.mark.parametrize("damage", ["cut", "garbage", "format", "not-a-memory"])
def test_an_unreadable_snapshot_means_a_refill(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "facts.snapshot"
    snapshot = MemorySnapshot(path, EMBEDDING)
    memory = FactMemory(3)
    memory.upsert(FIRST, [vector(n) for n in (1, 2, 3)], 1)
    snapshot.write(memory, KEY, 5)
    header, body = path.read_bytes().split(b"\n", 1)
    if damage == "cut":
        path.write_bytes(header + b"\n" + body[: len(body) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff" * 50)
    elif damage == "format":
        path.write_bytes(header.replace(b'"format": 1', b'"format": 99') + b"\n" + body)
    else:
        snapshot.write(memory, KEY, 5)
        import pickle

        path.write_bytes(header + b"\n" + pickle.dumps({"dimensions": 3}))
    assert snapshot.read(KEY, cursor=5) is None
    assert not path.exists()


def test_a_failed_write_keeps_the_previous_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "facts.snapshot"
    snapshot = MemorySnapshot(path, EMBEDDING)
    memory = FactMemory(3)
    memory.upsert(FIRST, [vector(n) for n in (1, 2, 3)], 1)
    snapshot.write(memory, KEY, 5)
    memory.unpicklable = lambda: None  # type: ignore[attr-defined]
    with pytest.raises(Exception):  # noqa: B017 - pickle's error type varies by object
        snapshot.write(memory, KEY, 6)
    restored = snapshot.read(KEY, cursor=10)
    assert restored is not None and restored[1] == 5
    assert [p.name for p in tmp_path.iterdir()] == ["facts.snapshot"]


@contextlib.asynccontextmanager
async def running(loop: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Runs a service's background loop for the block."""
    task = asyncio.create_task(loop)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_running_replica_writes_a_snapshot_when_its_memory_moved_on(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    path = tmp_path / "facts.snapshot"
    await apply(pool, FIRST, 1)
    index = await loaded(pool, path)
    written = MemorySnapshot(path, EMBEDDING)
    key = SnapshotKey(await epoch(pool), EMBEDDING, 3)
    async with running(index.keep_snapshots(0.05)):
        await asyncio.sleep(0.3)
        assert written.read(key, cursor=10)[1] == 3  # nothing new: the load's one
        await index.apply(LATER, 6, vectors=[vector(n) for n in (10, 11, 12)])
        for _ in range(100):
            if written.read(key, cursor=10)[1] == 6:
                break
            await asyncio.sleep(0.05)
        assert written.read(key, cursor=10)[1] == 6
    await index.close()


def test_a_write_removes_what_a_killed_write_left_behind(tmp_path: Path) -> None:
    """A partial file of a process that is gone, or of an earlier process with this pid
    (a restarted container's first process), goes; another live process's stays."""
    path = tmp_path / "facts.snapshot"
    finished = subprocess.Popen(["true"])  # its pid is then free (or reused later: rare)
    finished.wait()
    abandoned = tmp_path / f"facts.snapshot.{finished.pid}.a1.partial"
    reused_pid = tmp_path / f"facts.snapshot.{os.getpid()}.b2.partial"
    live_other = tmp_path / "facts.snapshot.1.c3.partial"  # pid 1: always alive
    for partial in (abandoned, reused_pid, live_other):
        partial.write_bytes(b"half")
    memory = FactMemory(3)
    memory.upsert(FIRST, [vector(n) for n in (1, 2, 3)], 1)
    MemorySnapshot(path, EMBEDDING).write(memory, KEY, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, live_other.name]


def test_a_snapshot_of_other_memory_code_is_not_read(tmp_path: Path) -> None:
    snapshot = MemorySnapshot(tmp_path / "facts.snapshot", EMBEDDING)
    memory = FactMemory(3)
    memory.upsert(FIRST, [vector(n) for n in (1, 2, 3)], 1)
    snapshot.write(memory, KEY, 5)
    assert KEY.code == snapshot.key("epoch-1", EMBEDDING, 3).code  # this code's
    assert snapshot.read(KEY, cursor=5) is not None
    assert snapshot.read(dataclasses.replace(KEY, code="an-older-release"), cursor=5) is None


@pytest.mark.parametrize("replayer", ["writer", "follower"])
async def test_a_stop_during_a_replay_from_an_earlier_position_leaves_no_snapshot(
    pool: asyncpg.Pool, tmp_path: Path, replayer: str
) -> None:
    """A replay that keeps the epoch (a vector store found empty, a follower's local shard)
    rewrites the memory with older values: until it is past what the memory held, its
    snapshot would bring a retracted version back."""
    path = tmp_path / "facts.snapshot"
    first = fact(1, "payments api owned by checkout")
    retracted = dataclasses.replace(first, state=FactState.RETRACTED)
    await apply(pool, [first], 1)
    await apply(pool, [retracted], 2)
    index = await loaded(pool, path)  # the refill's snapshot: position 2, retracted
    if replayer == "writer":
        await index.apply([first], 1, vectors=[vector(1)])
    else:
        await index.remember([first], 1, [vector(1)])
    await index.close()
    if replayer == "writer":
        await apply(pool, [retracted], 2)  # the replay goes on past 2 (the cursor with it)
    again = await loaded(pool, path)
    assert again.loaded_from == "snapshot"
    assert await again.search("payments", query(), 10) == []
    await again.close()


async def test_an_erasure_deletes_the_snapshot_and_the_writer_writes_one_without_it(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    path = tmp_path / "facts.snapshot"
    await apply(pool, FIRST + LATER, 1)
    writer = await loaded(pool, path)
    follower = await loaded(pool, tmp_path / "follower.snapshot")
    # What the memory keeps of k2: its ids, its subject and a term only it has.
    erased = (b"k2-v1", b"subject 2", b"runbook")
    assert all(part in path.read_bytes() for part in erased)
    await writer.delete(["k2-v1"])
    assert not path.exists()  # gone with the erasure, before any new write
    assert await writer.save_snapshot() == 6  # under the epoch the writer's erasure made
    assert not any(part in path.read_bytes() for part in erased)
    await writer.close()
    again = await loaded(pool, path)
    assert again.loaded_from == "snapshot"
    assert "k2-v1" not in {c.version_id for c in await again.search("ledger", query(), 10)}
    await again.close()

    # A follower learns of the erasure from the log: its file goes, and it writes no other
    # until it starts again (it cannot know it saw the last erasure of that epoch).
    await follower.forget(["k2-v1"])
    assert not (tmp_path / "follower.snapshot").exists()
    assert await follower.save_snapshot() is None
    await follower.close()
    assert not (tmp_path / "follower.snapshot").exists()


def test_a_write_dumped_before_a_discard_never_lands(tmp_path: Path) -> None:
    path = tmp_path / "facts.snapshot"
    snapshot = MemorySnapshot(path, EMBEDDING)
    memory = FactMemory(3)
    memory.upsert(FIRST, [vector(n) for n in (1, 2, 3)], 1)
    dumped = snapshot.dump(memory, KEY, 5)
    snapshot.discard()
    assert snapshot.commit(dumped) is False
    assert list(tmp_path.iterdir()) == []


# The writer's snapshot shared through PostgreSQL (shared_snapshot.py): a replica that
# starts with an empty data directory copies it.
SECRET = b"an internal key of at least 32 bytes!"


async def replica(
    pool: asyncpg.Pool, path: Path, secret: bytes = SECRET, *, writer: bool = False
) -> DocumentIndex:
    index = DocumentIndex(
        pool, FactMemory(3), snapshot=MemorySnapshot(path, EMBEDDING),
        shared=SharedSnapshot(pool, secret),
    )  # fmt: skip
    if writer:
        await index.claim_writer()
    await index.load()
    return index


async def first_published(pool: asyncpg.Pool, path: Path) -> None:
    """FIRST indexed, and a writer (its snapshot at ``path``) published its copy, then stopped."""
    await apply(pool, FIRST, 1)
    writer = await replica(pool, path, writer=True)
    assert await writer.publish_snapshot() == 3
    await writer.close()


async def generation(pool: asyncpg.Pool) -> object:
    return await pool.fetchval("SELECT generation FROM shared_snapshot")


async def published(pool: asyncpg.Pool) -> tuple[int, int]:
    """(head rows, chunk rows) in the shared tables."""
    heads = await pool.fetchval("SELECT count(*) FROM shared_snapshot")
    return heads, await pool.fetchval("SELECT count(*) FROM shared_snapshot_chunks")


async def test_a_new_replica_copies_the_writers_snapshot_and_reads_the_rows_since(
    pool: asyncpg.Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_snapshot, "CHUNK_BYTES", 1000)  # a file of several chunks
    await apply(pool, FIRST, 1)
    writer = await replica(pool, tmp_path / "writer" / "facts.snapshot", writer=True)
    assert writer.loaded_from == "documents"  # nothing published yet
    assert await writer.publish_snapshot() == 3
    heads, chunks = await published(pool)
    assert heads == 1 and chunks > 1
    copy = await generation(pool)
    assert await writer.publish_snapshot() == 3 and await generation(pool) == copy  # kept
    await apply(pool, LATER, 4)

    new_path = tmp_path / "new" / "facts.snapshot"  # a new pod: an empty data directory
    new = await replica(pool, new_path)
    refilled = await loaded(pool, None)
    assert new.loaded_from == "shared snapshot" and new_path.exists()
    assert await answers(new) == await answers(refilled)
    assert [p.name for p in new_path.parent.iterdir()] == ["facts.snapshot"]
    assert await new.publish_snapshot() is None  # not the writer: never publishes
    for index in (new, refilled, writer):
        await index.close()


async def test_the_writer_publishes_from_its_snapshot_loop(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    await apply(pool, FIRST, 1)
    writer = await replica(pool, tmp_path / "writer" / "facts.snapshot", writer=True)
    async with running(writer.keep_snapshots(0.05)):
        await writer.apply(LATER, 6, vectors=[vector(n) for n in (10, 11, 12)])
        for _ in range(100):
            header = await pool.fetchval("SELECT header FROM shared_snapshot")
            if header and MemorySnapshot.header_epoch_and_position(header)[1] == 6:
                break
            await asyncio.sleep(0.05)
        assert MemorySnapshot.header_epoch_and_position(header) == (await epoch(pool), 6)
    await writer.close()


async def test_a_copy_that_fails_its_mac_is_not_used(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    await first_published(pool, tmp_path / "writer" / "facts.snapshot")

    other_key = await replica(pool, tmp_path / "a" / "facts.snapshot", b"another key" * 4)
    assert other_key.loaded_from == "documents"
    await other_key.close()
    await pool.execute(  # one bit of the body flipped
        "UPDATE shared_snapshot_chunks SET chunk = set_byte(chunk, length(chunk) - 10,"
        " get_byte(chunk, length(chunk) - 10) # 1) WHERE seq = 0"
    )
    tampered_path = tmp_path / "b" / "facts.snapshot"
    tampered = await replica(pool, tampered_path)
    assert tampered.loaded_from == "documents"
    # The refill wrote a file of its own; nothing of the bad copy is left beside it.
    assert [p.name for p in tampered_path.parent.iterdir()] == ["facts.snapshot"]
    await tampered.close()


async def test_an_erasure_or_a_re_embedding_deletes_the_published_copy(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    await apply(pool, FIRST + LATER, 1)
    writer = await replica(pool, tmp_path / "writer" / "facts.snapshot", writer=True)
    assert await writer.publish_snapshot() == 6
    assert b"runbook" in b"".join(
        await pool.fetchval("SELECT array_agg(chunk ORDER BY seq) FROM shared_snapshot_chunks")
    )
    await writer.delete(["k2-v1"])
    assert await published(pool) == (0, 0)  # in the erasure's own transaction
    new = await replica(pool, tmp_path / "new" / "facts.snapshot")
    assert new.loaded_from == "documents"
    await new.close()

    assert await writer.save_snapshot() == 6  # under the epoch the writer's erasure made
    assert await writer.publish_snapshot() == 6
    await writer.restart_for_embedding(EMBEDDING)
    assert await published(pool) == (0, 0)
    await writer.close()


async def test_a_copy_made_before_an_epoch_change_or_by_a_fenced_writer_never_lands(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    await apply(pool, FIRST + LATER, 1)
    writer = await replica(pool, tmp_path / "writer" / "facts.snapshot", writer=True)
    successor = await replica(pool, tmp_path / "successor" / "facts.snapshot", writer=True)
    assert await writer.publish_snapshot() is None  # fenced: another claimed since
    assert await published(pool) == (0, 0)

    # The successor's file was written before another replica's erasure (it holds k2).
    await DocumentIndex(pool).delete(["k2-v1"])
    assert await successor.publish_snapshot() is None
    assert await published(pool) == (0, 0)
    for index in (writer, successor):
        await index.close()


async def waiting_for_locks(watcher: asyncpg.Connection, count: int) -> None:
    for _ in range(200):
        waiting = await watcher.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        )
        if waiting >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} sessions never waited for a lock")


async def test_an_erasure_waits_for_a_copy_in_flight_and_deletes_it(
    pool: asyncpg.Pool, pg_dsn: str, tmp_path: Path
) -> None:
    """The copy asks for index_state's row first and commits first; the erasure's purge, a
    statement after its epoch change, then sees and deletes it."""
    await apply(pool, FIRST + LATER, 1)
    writer = await replica(pool, tmp_path / "writer" / "facts.snapshot", writer=True)
    watcher = await asyncpg.connect(pg_dsn)  # the pool's three are the holder, copy, erasure
    async with pool.acquire() as holder, holder.transaction():
        await holder.execute("SELECT 1 FROM index_state WHERE id FOR UPDATE")
        copying = asyncio.create_task(writer.publish_snapshot())
        await waiting_for_locks(watcher, 1)  # the copy's chunks are in; it waits for the row
        erasing = asyncio.create_task(DocumentIndex(pool).delete(["k2-v1"]))
        await waiting_for_locks(watcher, 2)
    await watcher.close()
    assert await copying == 6
    await erasing
    assert await published(pool) == (0, 0)
    await writer.close()


async def test_a_copy_of_other_memory_code_is_not_downloaded(
    pool: asyncpg.Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout that changes the memory code: the old writer's copy is refused from its
    signed header, before its bytes are fetched."""
    await first_published(pool, tmp_path / "writer" / "facts.snapshot")
    newer_code = MemorySnapshot.key
    monkeypatch.setattr(MemorySnapshot, "key", lambda self, *args: dataclasses.replace(
        newer_code(self, *args), code="a-newer-release"))  # fmt: skip
    written = spy_on_writes(monkeypatch)
    new = await replica(pool, tmp_path / "new" / "facts.snapshot")
    assert new.loaded_from == "documents" and written == []
    await new.close()


async def test_a_new_signing_key_publishes_again(pool: asyncpg.Pool, tmp_path: Path) -> None:
    """After a key rotation the same snapshot is copied again under the new key, or no new
    pod could use it until the memory moved on."""
    path = tmp_path / "writer" / "facts.snapshot"
    await first_published(pool, path)
    before = await generation(pool)
    rotated = b"the rotated signing key, 32 bytes or more"
    again = await replica(pool, path, rotated, writer=True)
    assert again.loaded_from == "snapshot" and await again.publish_snapshot() == 3
    assert await generation(pool) != before
    await again.close()
    new = await replica(pool, tmp_path / "new" / "facts.snapshot", rotated)
    assert new.loaded_from == "shared snapshot"
    await new.close()


def spy_on_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the chunks a fetch writes to disk, from now on."""
    written: list[int] = []
    write_from = shared_snapshot._write_from
    monkeypatch.setattr(shared_snapshot, "_write_from",
                        lambda file, mac, chunk: written.append(len(chunk)) or write_from(
                            file, mac, chunk))  # fmt: skip
    return written


async def test_a_forged_head_is_refused_before_anything_is_written(
    pool: asyncpg.Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database writer without the key cannot make a new pod fill its disk."""
    await first_published(pool, tmp_path / "writer" / "facts.snapshot")
    await pool.execute("UPDATE shared_snapshot SET size = size * 1000")
    await pool.execute(
        "INSERT INTO shared_snapshot_chunks SELECT generation, s, chunk"
        " FROM shared_snapshot_chunks, generate_series(1, 50) s"
    )
    written = spy_on_writes(monkeypatch)
    new = await replica(pool, tmp_path / "new" / "facts.snapshot")
    assert new.loaded_from == "documents" and written == []
    await new.close()


async def test_an_erasure_while_a_copy_writes_its_chunks_rolls_the_copy_back(
    pool: asyncpg.Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_snapshot, "CHUNK_BYTES", 1000)
    await apply(pool, FIRST + LATER, 1)
    writer = await replica(pool, tmp_path / "writer" / "facts.snapshot", writer=True)
    first_chunk_in, go_on = threading.Event(), threading.Event()
    read_into = shared_snapshot._read_into

    def pausing(file, mac):
        if file.tell() > 0:  # one chunk inserted: wait for the erasure to commit
            first_chunk_in.set()
            assert go_on.wait(10)
        return read_into(file, mac)

    monkeypatch.setattr(shared_snapshot, "_read_into", pausing)
    copying = asyncio.create_task(writer.publish_snapshot())
    assert await asyncio.to_thread(first_chunk_in.wait, 10)
    await DocumentIndex(pool).delete(["k2-v1"])  # commits: the copy's rows are not yet seen
    go_on.set()
    assert await copying is None  # it saw the new epoch under the lock and rolled back
    assert await published(pool) == (0, 0)
    await writer.close()


def test_sharing_needs_the_signing_key() -> None:
    settings = load_settings(
        retrieval={"share_memory_snapshot": True, "snapshot_signing_key": None}
    )
    with pytest.raises(ConfigError, match="VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY"):
        retrieval_server._shared_snapshot(settings, None)  # type: ignore[arg-type]
