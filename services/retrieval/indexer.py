"""The change-log tailer: knowledge's outbox -> vectors (Qdrant) + documents (PostgreSQL).

Each page is applied vectors first, then documents and the cursor in one PostgreSQL
transaction, so a crash in between replays the page harmlessly (both writes are
idempotent by version id). It never dies: failures are logged without content and
retried with backoff.
"""

from __future__ import annotations

import asyncio
import logging

from vera.errors import VeraError
from vera.services.retrieval.model import ChangeKind, Fact, IndexStatus
from vera.services.retrieval.ports import Embedder, FactSource, LexicalIndex, VectorIndex

log = logging.getLogger(__name__)

PAGE_SIZE = 256
MAX_BACKOFF_SECONDS = 5.0
# How long a caught-up tailer's read waits for the next change (knowledge answers as soon as
# one commits). Short enough that a stopping knowledge service drains it quickly.
LONG_POLL_SECONDS = 2.0


def embedding_text(fact: Fact) -> str:
    """What a fact version is embedded as (index contract "index-1")."""
    return f"{fact.subject} {fact.predicate.replace('_', ' ')} {fact.object}"


def _describe(exc: BaseException) -> str:
    # Type and stable reason only: messages may quote fact text or queries.
    if isinstance(exc, VeraError):
        return f"{type(exc).__name__}({exc.reason})"
    return type(exc).__name__


class ChangeIndexer:
    def __init__(
        self,
        source: FactSource,
        embedder: Embedder,
        vectors: VectorIndex,
        lexical: LexicalIndex,
        *,
        embedding: str,
        poll_seconds: float,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._source = source
        self._embedder = embedder
        self._vectors = vectors
        self._lexical = lexical
        self._embedding = embedding  # contract.embedding_version: what ``embedder`` makes
        self._poll = poll_seconds
        self._page_size = page_size
        self.indexed_position: int | None = None
        self.head_position = 0
        # Refreshed by the tailer after each page: a status call must never queue behind
        # an upsert on the index's executor (an exact count there took seconds at 2k facts).
        self.indexed_facts = 0

    async def status(self) -> IndexStatus:
        indexed = self.indexed_position
        if indexed is None:
            indexed = await self._lexical.cursor()
        return IndexStatus(
            indexed_position=indexed,
            head_position=max(self.head_position, indexed),
            indexed_facts=self.indexed_facts,
        )

    async def _start_position(self) -> int:
        cursor = await self._lexical.cursor()
        if await self._lexical.indexed_embedding() != self._embedding:
            # Vectors of another model or precision do not compare with this one's: replay
            # the log and re-embed every version (queries are served meanwhile). An index
            # from before the embedding was recorded is replayed once too.
            if cursor > 0:
                log.info("the index holds other vectors; re-embedding the change log")
            await self._lexical.restart_for_embedding(self._embedding)
            return 0
        if cursor > 0 and await self._vectors.count() == 0:
            # The vector store was dropped or is in memory: rebuild it from the log
            # (document upserts are idempotent, so replaying them is harmless).
            log.info("vector index is empty; replaying the change log from the start")
            return 0
        return cursor

    async def step(self, wait_seconds: float = 0.0) -> bool:
        """Applies one page; True when caught up with the head. With ``wait_seconds``, a
        read that finds nothing new waits that long for a change."""
        if self.indexed_position is None:
            self.indexed_position = await self._start_position()
            self.indexed_facts = await self._vectors.count()
        page = await self._source.list_changes(self.indexed_position, self._page_size, wait_seconds)
        self.head_position = max(self.head_position, page.head_position)
        changes = [c for c in page.changes if c.position > self.indexed_position]
        if not changes:
            return True
        latest: dict[str, Fact] = {}  # a version changed twice in one page: keep the last
        erased: list[str] = []
        for change in changes:
            if change.kind == ChangeKind.FACT_UPSERTED and change.fact is not None:
                latest.pop(change.fact.version_id, None)
                latest[change.fact.version_id] = change.fact
            elif change.kind == ChangeKind.FACT_ERASED and change.erased_version_id:
                erased.append(change.erased_version_id)
        if erased:
            # Before the cursor moves: a crash here replays the deletes (idempotent).
            for version_id in erased:
                latest.pop(version_id, None)
            await self._vectors.delete(erased)
            await self._lexical.delete(erased)
            self.indexed_facts = await self._vectors.count()
        facts = list(latest.values())
        vectors: list[list[float]] | None = None
        if facts:
            vectors = await self._embedder.embed([embedding_text(f) for f in facts])
            await self._vectors.upsert(facts, vectors)
            self.indexed_facts = await self._vectors.count()
        position = changes[-1].position
        await self._lexical.apply(facts, position, vectors=vectors)
        self.indexed_position = position
        self.head_position = max(self.head_position, position)
        return position >= page.head_position

    async def run(self) -> None:
        backoff = self._poll
        wait = 0.0
        loop = asyncio.get_running_loop()
        while True:
            before, started = self.indexed_position, loop.time()
            try:
                caught_up = await self.step(wait)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("indexing failed (%s); retrying in %.1fs", _describe(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                wait = 0.0
                continue
            backoff = self._poll
            if not caught_up:
                wait = 0.0
            elif not wait:
                wait = LONG_POLL_SECONDS
            elif self.indexed_position == before and loop.time() - started < self._poll:
                # Nothing new, answered sooner than asked: a knowledge service that does not
                # long-poll (an older release) is polled at the fixed interval instead.
                await asyncio.sleep(self._poll)
