"""The change-log tailer against fakes: paging, cursor, replay, recovery."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from vera.errors import Unavailable
from vera.services.retrieval.indexer import ChangeIndexer, embedding_text
from vera.services.retrieval.model import Change, ChangeKind, ChangePage, Fact

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

    def append(self, kind: ChangeKind, fact: Fact | None = None) -> None:
        self.changes.append(Change(len(self.changes) + 1, kind, fact))

    async def list_changes(self, after_position: int, page_size: int) -> ChangePage:
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

    async def apply(self, facts, position: int, vectors=None) -> None:
        for f in facts:
            self.rows[f.version_id] = f
        self.position = position

    async def cursor(self) -> int:
        return self.position


def indexer(log: FakeLog, **kwargs) -> tuple[ChangeIndexer, FakeEmbedder, FakeVectors, FakeLexical]:
    embedder, vectors, lexical = FakeEmbedder(), FakeVectors(), FakeLexical(**kwargs)
    tailer = ChangeIndexer(log, embedder, vectors, lexical, poll_seconds=0.01, page_size=2)
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
