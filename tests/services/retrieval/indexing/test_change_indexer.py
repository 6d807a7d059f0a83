"""The change-log tailer against fakes: paging, cursor, replay, recovery."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from vera.errors import Unavailable
from vera.services.retrieval.domain import Change, ChangeKind, ChangePage, Fact
from vera.services.retrieval.indexing.indexer import (
    LONG_POLL_SECONDS,
    ChangeIndexer,
    embedding_text,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def version(key: str, n: int) -> Fact:
    return Fact(
        fact_key=key,
        version_id=f"{key}-v{n}",
        scope_id="s",
        subject=key,
        predicate="owned_by",
        object=f"team {n}",
        recorded_at=T0.replace(day=n),
    )


@dataclass
class FakeLog:
    changes: list[Change] = field(default_factory=list)
    failures: int = 0
    waits: list[float] = field(default_factory=list)

    def append(self, kind: ChangeKind, fact: Fact | None = None) -> None:
        self.changes.append(Change(len(self.changes) + 1, kind, fact))

    async def list_changes(
        self, after_position: int, page_size: int, wait_seconds: float = 0.0
    ) -> ChangePage:
        self.waits.append(wait_seconds)
        if self.failures:
            self.failures -= 1
            raise Unavailable("knowledge down")
        page = [c for c in self.changes if c.position > after_position][:page_size]
        return ChangePage(page, len(self.changes))


class FakeEmbedder:
    dimensions = 2

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [[1.0, 0.0] for _ in texts]


@dataclass
class FakeVectors:
    points: dict[str, Fact] = field(default_factory=dict)

    async def upsert(self, facts, vectors) -> None:
        assert len(facts) == len(vectors)
        for f in facts:
            self.points[f.version_id] = f

    async def count(self) -> int:
        return len(self.points)


@dataclass
class FakeLexical:
    rows: dict[str, Fact] = field(default_factory=dict)
    position: int = 0
    embedding: str | None = None

    async def apply(self, facts, position: int, vectors=None) -> None:
        for f in facts:
            self.rows[f.version_id] = f
        self.position = position

    async def cursor(self) -> int:
        return self.position

    async def indexed_embedding(self) -> str | None:
        return self.embedding

    async def restart_for_embedding(self, embedding: str) -> None:
        self.position, self.embedding = 0, embedding


EMBEDDING = "minilm-test"


def indexer(
    log: FakeLog, running: str = EMBEDDING, **kwargs
) -> tuple[ChangeIndexer, FakeEmbedder, FakeVectors, FakeLexical]:
    """A tailer whose embedder makes ``running``; ``kwargs`` set up the lexical index."""
    embedder, vectors = FakeEmbedder(), FakeVectors()
    lexical = FakeLexical(**{"embedding": EMBEDDING, **kwargs})
    tailer = ChangeIndexer(
        log, embedder, vectors, lexical, embedding=running, poll_seconds=0.01, page_size=2
    )
    return tailer, embedder, vectors, lexical


async def test_pages_through_the_log_and_advances_the_cursor():
    log = FakeLog()
    log.append(ChangeKind.FACT_UPSERTED, version("a", 1))
    log.append(ChangeKind.SOURCE_UPSERTED)
    log.append(ChangeKind.FACT_UPSERTED, version("b", 1))
    log.append(ChangeKind.FACT_UPSERTED, version("a", 2))
    log.append(ChangeKind.FEEDBACK_RECORDED)
    tailer, embedder, vectors, lexical = indexer(log)

    assert await tailer.step() is False
    assert lexical.position == 2 and list(vectors.points) == ["a-v1"]
    while not await tailer.step():
        pass
    assert lexical.position == 5
    assert sorted(vectors.points) == sorted(lexical.rows) == ["a-v1", "a-v2", "b-v1"]
    assert embedder.batches[0] == [embedding_text(version("a", 1))] == ["a owned by team 1"]
    status = await tailer.status()
    assert (status.indexed_position, status.head_position, status.indexed_facts) == (5, 5, 3)
    assert await tailer.step() is True  # caught up: nothing new


async def test_resumes_from_the_stored_cursor_and_rebuilds_an_empty_vector_index():
    log = FakeLog()
    for n in range(1, 4):
        log.append(ChangeKind.FACT_UPSERTED, version(f"k{n}", n))
    resumed, _, vectors, _ = indexer(log, position=3)
    vectors.points["k1-v1"] = version("k1", 1)
    assert await resumed.step() is True
    assert resumed.indexed_position == 3 and list(vectors.points) == ["k1-v1"]

    rebuilt, _, vectors, lexical = indexer(log, position=3)  # vectors lost, cursor kept
    while not await rebuilt.step():
        pass
    assert sorted(vectors.points) == ["k1-v1", "k2-v2", "k3-v3"]
    assert lexical.position == 3


@pytest.mark.parametrize("indexed_with", ["minilm-l6-v2", None])
async def test_an_index_of_other_vectors_is_re_embedded_from_the_start(indexed_with):
    """A change of model or precision (or an index from before either was recorded): the
    stored vectors do not compare with the new ones, so every version is embedded again."""
    log = FakeLog()
    for n in range(1, 4):
        log.append(ChangeKind.FACT_UPSERTED, version(f"k{n}", n))
    tailer, embedder, vectors, lexical = indexer(
        log, "minilm-l6-v2-int8", position=3, embedding=indexed_with
    )
    vectors.points = {f"k{n}-v{n}": version(f"k{n}", n) for n in range(1, 4)}
    while not await tailer.step():
        pass
    assert [t for batch in embedder.batches for t in batch] == [
        embedding_text(version(f"k{n}", n)) for n in range(1, 4)
    ]
    assert (lexical.position, lexical.embedding) == (3, "minilm-l6-v2-int8")

    restarted, embedder, vectors, _ = indexer(
        log, "minilm-l6-v2-int8", position=3, embedding=lexical.embedding
    )
    vectors.points = {f"k{n}-v{n}": version(f"k{n}", n) for n in range(1, 4)}
    assert await restarted.step() is True
    assert embedder.batches == []  # the same embedding: nothing is made twice


async def test_run_survives_failures_and_catches_up():
    log = FakeLog(failures=2)
    log.append(ChangeKind.FACT_UPSERTED, version("a", 1))
    tailer, _, vectors, lexical = indexer(log)
    task = asyncio.create_task(tailer.run())
    try:
        for _ in range(200):
            if lexical.position == 1:
                break
            await asyncio.sleep(0.01)
        assert lexical.position == 1 and "a-v1" in vectors.points
        log.append(ChangeKind.FACT_UPSERTED, version("a", 2))
        for _ in range(200):
            if lexical.position == 2:
                break
            await asyncio.sleep(0.01)
        assert lexical.position == 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()


@dataclass
class WaitingLog(FakeLog):
    """A source that long-polls like knowledge: an empty read waits for the next append."""

    def __post_init__(self) -> None:
        self.appended = asyncio.Event()

    def append(self, kind: ChangeKind, fact: Fact | None = None) -> None:
        super().append(kind, fact)
        self.appended.set()
        self.appended = asyncio.Event()

    async def list_changes(self, after_position, page_size, wait_seconds=0.0) -> ChangePage:
        page = await super().list_changes(after_position, page_size, wait_seconds)
        if page.changes or not wait_seconds:
            return page
        try:
            await asyncio.wait_for(self.appended.wait(), wait_seconds)
        except TimeoutError:
            return page
        return await super().list_changes(after_position, page_size, 0.0)


async def until(condition) -> None:
    for _ in range(300):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_caught_up_tailer_waits_for_the_next_change_instead_of_polling():
    log = WaitingLog()
    log.append(ChangeKind.FACT_UPSERTED, version("a", 1))
    tailer, _, _, lexical = indexer(log)
    task = asyncio.create_task(tailer.run())
    try:
        await until(lambda: lexical.position == 1)
        reads = len(log.waits)
        await asyncio.sleep(0.5)  # idle: one long poll in flight, not 50 polls
        assert len(log.waits) - reads <= 1
        assert log.waits[-1] == LONG_POLL_SECONDS
        log.append(ChangeKind.FACT_UPSERTED, version("b", 1))
        await until(lambda: lexical.position == 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_source_that_answers_at_once_is_polled_at_the_interval_not_in_a_busy_loop():
    log = FakeLog()  # ignores the wait, as a knowledge service that cannot long-poll
    log.append(ChangeKind.FACT_UPSERTED, version("a", 1))
    tailer, _, _, lexical = indexer(log)  # poll_seconds=0.01
    task = asyncio.create_task(tailer.run())
    try:
        await until(lambda: lexical.position == 1)
        reads = len(log.waits)
        await asyncio.sleep(0.5)
        assert len(log.waits) - reads <= 0.5 / 0.01 + 5
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
