"""The change-log tailer: knowledge's outbox -> vectors (Qdrant) + documents (PostgreSQL).

One process per deployment writes (it holds the writer lease): each page is applied
vectors first, then documents and the cursor in one PostgreSQL transaction, so a crash in
between replays the page harmlessly (both writes are idempotent by version id). Every other
replica follows: it reads the same log, so erasures arrive in order, but applies a change
only once the writer's cursor has passed it, taking each version's vector from its stored
document instead of embedding it. It keeps its own in-process memory current (and its own
vector shard, when that is local; a Qdrant server has the writer's points already). A
follower that wins the lease first catches up from what the writer stored, then writes from
the shared cursor. The tailer never dies: failures are logged without content and retried
with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from vera.errors import VeraError
from vera.services.retrieval.domain import Change, ChangeKind, Fact, IndexStatus
from vera.services.retrieval.ports import (
    Embedder,
    FactSource,
    IndexWriter,
    VectorIndex,
    WriterLease,
)

log = logging.getLogger(__name__)

PAGE_SIZE = 256
MAX_BACKOFF_SECONDS = 5.0
# How long a caught-up tailer's read waits for the next change (knowledge answers as soon as
# one commits). Short enough that a stopping knowledge service drains it quickly.
LONG_POLL_SECONDS = 2.0
# How often a follower looks again while the stored vectors are another model's: that lasts
# until a writer of its own release re-embeds (minutes, in a rollout that changes models).
OTHER_EMBEDDING_WAIT_SECONDS = 5.0


def embedding_text(fact: Fact) -> str:
    """What a fact version is embedded as (index contract "index-1")."""
    return f"{fact.subject} {fact.predicate.replace('_', ' ')} {fact.object}"


def _collect(changes: list[Change]) -> tuple[list[Fact], list[str]]:
    """A page's latest version of each upserted version (minus the erased) and erasures."""
    latest: dict[str, Fact] = {}  # a version changed twice in one page: keep the last
    erased: list[str] = []
    for change in changes:
        if change.kind == ChangeKind.FACT_UPSERTED and change.fact is not None:
            latest.pop(change.fact.version_id, None)
            latest[change.fact.version_id] = change.fact
        elif change.kind == ChangeKind.FACT_ERASED and change.erased_version_id:
            erased.append(change.erased_version_id)
    for version_id in erased:
        latest.pop(version_id, None)
    return list(latest.values()), erased


async def _cancel(task: asyncio.Task) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


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
        index: IndexWriter,
        *,
        embedding: str,
        poll_seconds: float,
        page_size: int = PAGE_SIZE,
        lease: WriterLease | None = None,
        shared_vectors: bool = False,
        loaded_position: int | None = None,
    ) -> None:
        """Without ``lease`` the process always writes. ``shared_vectors``: ``vectors`` is
        a server every replica reads (only the writer upserts it). ``loaded_position``: the
        writer's cursor when the lexical memory was loaded (where a follower resumes)."""
        self._source = source
        self._embedder = embedder
        self._vectors = vectors
        self._index = index
        self._embedding = embedding  # contract.embedding_version: what ``embedder`` makes
        self._poll = poll_seconds
        self._page_size = page_size
        self._lease = lease
        self._shared_vectors = shared_vectors
        # Where a follower starts: a local shard's contents have no recorded position, so
        # it is replayed from the start (stored vectors, nothing embedded); a shared one is
        # the writer's, and the memory stands where it was loaded.
        self._follow_from = (loaded_position or 0) if shared_vectors else 0
        self._loaded_position = loaded_position or 0
        self.writing = lease is None
        # A promoted follower settles where to write from before its first write.
        self._settle = False
        self._catch_up_to: int | None = None
        self.indexed_position: int | None = None
        self.head_position = 0
        # Refreshed by the tailer after each page: a status call must never queue behind
        # an upsert on the index's executor (an exact count there took seconds at 2k facts).
        self.indexed_facts = 0

    async def status(self) -> IndexStatus:
        """This process's own progress: what its memory (and vectors) hold, writer or not."""
        indexed = self.indexed_position
        if indexed is None and self._lease is not None:
            indexed = self._follow_from  # not started yet: what a follower would vouch for
        if indexed is None:
            indexed = await self._index.cursor()
        return IndexStatus(
            indexed_position=indexed,
            head_position=max(self.head_position, indexed),
            indexed_facts=self.indexed_facts,
        )

    async def _start_position(self) -> int:
        cursor = await self._index.cursor()
        if await self._index.indexed_embedding() != self._embedding:
            # Vectors of another model or precision do not compare with this one's: replay
            # the log and re-embed every version (queries are served meanwhile). An index
            # from before the embedding was recorded is replayed once too.
            if cursor > 0:
                log.info("the index holds other vectors; re-embedding the change log")
            await self._index.restart_for_embedding(self._embedding)
            return 0
        if cursor > 0 and await self._vectors.count() == 0:
            # The vector store was dropped or is in memory: rebuild it from the log
            # (document upserts are idempotent, so replaying them is harmless).
            log.info("vector index is empty; replaying the change log from the start")
            return 0
        return cursor

    async def _read(self, wait_seconds: float) -> tuple[list[Change], int]:
        """The changes after this process's position (one page) and the log's head."""
        assert self.indexed_position is not None
        page = await self._source.list_changes(self.indexed_position, self._page_size, wait_seconds)
        self.head_position = max(self.head_position, page.head_position)
        return [c for c in page.changes if c.position > self.indexed_position], page.head_position

    async def step(self, wait_seconds: float = 0.0) -> bool:
        """The writer's step: embeds and stores one page; True when caught up with the
        head. With ``wait_seconds``, a read that finds nothing new waits that long."""
        if self.indexed_position is None:
            self.indexed_position = await self._start_position()
            self.indexed_facts = await self._vectors.count()
        changes, head = await self._read(wait_seconds)
        if not changes:
            return True
        facts, erased = _collect(changes)
        if self._lease is not None:
            # The cursor's transaction refuses a fenced writer, but the vector index is
            # written before it: ask first (a stale writer could re-add an erased point).
            await self._index.check_writer()
        if erased:
            # Before the cursor moves: a crash here replays the deletes (idempotent).
            await self._vectors.delete(erased)
            await self._index.delete(erased)
            self.indexed_facts = await self._vectors.count()
        vectors: list[list[float]] | None = None
        if facts:
            vectors = await self._embedder.embed([embedding_text(f) for f in facts])
            await self._vectors.upsert(facts, vectors)
            self.indexed_facts = await self._vectors.count()
        position = changes[-1].position
        await self._index.apply(facts, position, vectors=vectors)
        self.indexed_position = position
        self.head_position = max(self.head_position, position)
        return position >= head

    async def follow_step(self, wait_seconds: float = 0.0, written: int | None = None) -> bool:
        """The follower's step: applies what the writer has stored of one page (waiting
        for its cursor to reach the page); True when caught up with the head. ``written``:
        the writer's cursor when it is known not to move (this process holds the lease)."""
        if self.indexed_position is None:
            self.indexed_position = self._follow_from
            self.indexed_facts = await self._vectors.count()
        changes, head = await self._read(wait_seconds)
        if written is not None and (not changes or changes[0].position > written):
            self.indexed_position = max(self.indexed_position, written)  # nothing in between
            return not changes
        if not changes:
            return True
        while written is None or written < changes[0].position:
            written = await self._written_position()
            if written is None:
                # The stored vectors are another model's (a writer of another release, or
                # about to re-embed into this one's): start over once this one's are stored.
                self.indexed_position = 0
                await asyncio.sleep(OTHER_EMBEDDING_WAIT_SECONDS)
                return False
            if written < changes[0].position:
                await asyncio.sleep(self._poll)
        ready = [c for c in changes if c.position <= written]
        facts, erased = _collect(ready)
        if erased:
            if not self._shared_vectors:
                await self._vectors.delete(erased)
            await self._index.forget(erased)
        stored = await self._index.stored_vectors([f.version_id for f in facts])
        # A version without a document was erased later, by a change the writer applied.
        facts = [f for f in facts if f.version_id in stored]
        vectors = [stored[f.version_id] for f in facts]
        if not self._shared_vectors:
            with_vectors = [(f, v) for f, v in zip(facts, vectors, strict=True) if v is not None]
            if with_vectors:
                await self._vectors.upsert(
                    [f for f, _ in with_vectors], [v for _, v in with_vectors]
                )
        if facts or erased:
            self.indexed_facts = await self._vectors.count()
        position = ready[-1].position
        await self._index.remember(facts, position, vectors)
        self.indexed_position = position
        return position >= head

    async def _written_position(self) -> int | None:
        """The writer's cursor; None while the stored vectors are not this process's
        embedding."""
        if await self._index.indexed_embedding() != self._embedding:
            return None
        return await self._index.cursor()

    async def _writer_step(self, wait_seconds: float) -> bool:
        """``step`` under the lease. A process that followed before first catches up to the
        shared cursor from what the previous writer stored (nothing is embedded twice)."""
        if self._settle:
            assert self.indexed_position is not None
            await self._index.claim_writer()  # fences off a predecessor still writing
            self.indexed_facts = await self._vectors.count()
            start = await self._start_position()
            if start < self.indexed_position:
                self.indexed_position = start  # a replay (another embedding, lost vectors)
            self._catch_up_to = start
            self._settle = False
        if self._catch_up_to is not None:
            assert self.indexed_position is not None
            if self.indexed_position < self._catch_up_to:
                await self.follow_step(0.0, written=self._catch_up_to)
                return False
            self._catch_up_to = None
        return await self.step(wait_seconds)

    async def run(self) -> None:
        if self._lease is None:
            await self._tail(self.step)
            return
        just_lost = False
        while True:
            follower: asyncio.Task | None = None
            try:
                # A writer that just lost its lease lets the others ask first: the one
                # whose session broke is the likelier one to have a bad link.
                while just_lost or not await self._try_lease():
                    just_lost = False
                    if follower is None:
                        log.info("another replica writes the index; following it")
                        follower = asyncio.create_task(self._tail(self.follow_step))
                    # A follower learns of a vacancy only by asking again; this bounds how
                    # long the index goes unwritten after its writer dies.
                    await asyncio.sleep(self._lease.retry_seconds)
            finally:
                if follower is not None:
                    await _cancel(follower)
            await self._write_while_leased()
            just_lost = True

    async def _try_lease(self) -> bool:
        assert self._lease is not None
        try:
            return await self._lease.acquire()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("cannot try the writer lease (%s)", _describe(exc))
            return False

    async def _write_while_leased(self) -> None:
        """Writes until the lease is lost, then stops at once (mid-page: the next writer
        replays that page, and every write is idempotent)."""
        assert self._lease is not None
        log.info("writing the index")
        self.writing = True
        if self.indexed_position is None:
            # Writing before ever following: the memory stands where it was loaded, and the
            # previous writer may have stored more since (catch up from its stored vectors).
            self.indexed_position = self._loaded_position
        self._settle = True
        writer = asyncio.create_task(self._tail(self._writer_step))
        lost = asyncio.create_task(self._lease.lost())
        try:
            await asyncio.wait({writer, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.writing = False
            await _cancel(writer)
            await _cancel(lost)
            await self._lease.release()
        log.warning("lost the writer lease; following")

    async def _tail(self, step: Callable[[float], Awaitable[bool]]) -> None:
        backoff = self._poll
        wait = 0.0
        loop = asyncio.get_running_loop()
        while True:
            before, started = self.indexed_position, loop.time()
            try:
                caught_up = await step(wait)
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
