"""The lexical leg and the change-log cursor, in PostgreSQL (schema ``retrieval``).

``retrieval.documents`` is the durable copy of what was indexed (text, attributes, first
citation, vector). With a FactMemory (the default in the service), searches run BM25 in
process over it (memory.py) on one worker thread, and the memory is reloaded from the table
on start (from a local snapshot plus the rows written since, when one is reusable:
memory_snapshot.py). Without one, the query is the OR of its English lexemes ranked by
ts_rank_cd over the fact (weight A) and its evidence (weight B): the PostgreSQL-only
fallback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

import asyncpg
import numpy as np

from vera.services.retrieval.domain import (
    Candidate,
    CandidateFeatures,
    Citation,
    Fact,
    FactState,
    IndexQuery,
)
from vera.services.retrieval.memory.facts import FactMemory
from vera.services.retrieval.ports import WriterFenced
from vera.services.retrieval.snapshots.local import Dumped, MemorySnapshot, SnapshotKey
from vera.services.retrieval.snapshots.shared import SharedSnapshot, purge

log = logging.getLogger(__name__)
T = TypeVar("T")
# Where a write of index_state holds only for the writer that claimed last ($2: its epoch;
# NULL: a process that never claimed, the lone writer).
_STILL_WRITER = "($2::bigint IS NULL OR writer_epoch = $2)"
# Weight of the neighbours' field next to the fact's own text in BM25 (memory.py).
CONTEXT_WEIGHT = 0.7
LOAD_BATCH = 5000

# The OR of the query's lexemes, each quoted for tsquery input ('' and \ escaped).
_OR_QUERY = r"""
    SELECT (string_agg(
                '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | '
            ))::tsquery AS tsq
    FROM unnest(to_tsvector('english'::regconfig, $1::text))
"""


def _where(query: IndexQuery, args: list[object], *, with_attributes: bool = True) -> str:
    """The shared filter; appends its parameters to ``args`` (numbered after them)."""

    def arg(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    clauses = [
        f"d.scope_id = ANY({arg(list(query.scope_ids))}::text[])",
        f"d.state = ANY({arg([int(s) for s in query.states])}::smallint[])",
    ]
    as_of = arg(query.as_of)
    clauses.append(f"(d.valid_from IS NULL OR d.valid_from <= {as_of})")
    clauses.append(f"(d.valid_to IS NULL OR d.valid_to > {as_of})")
    if query.known_as_of is not None:
        known = arg(query.known_as_of)
        clauses.append(f"(d.recorded_at IS NULL OR d.recorded_at <= {known})")
        clauses.append(f"(d.superseded_at IS NULL OR d.superseded_at > {known})")
    if with_attributes:
        if query.document_type:
            clauses.append(f"d.document_type = {arg(query.document_type)}")
        if query.source_type:
            clauses.append(f"d.source_type = {arg(query.source_type)}")
        if query.include_predicates:
            clauses.append(f"d.predicate = ANY({arg(list(query.include_predicates))}::text[])")
        if query.exclude_predicates:
            clauses.append(
                f"NOT (d.predicate = ANY({arg(list(query.exclude_predicates))}::text[]))"
            )
        if query.min_authority is not None:
            clauses.append(f"d.authority >= {arg(query.min_authority)}")
        if query.max_trust_tier is not None:
            clauses.append(f"d.trust_tier <= {arg(query.max_trust_tier)}")
    return " AND ".join(clauses)


def evidence_text(fact: Fact) -> str:
    return "\n".join(c.excerpt for c in fact.citations if c.excerpt)


def _vector_bytes(vector: Sequence[float] | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, "<f4").tobytes()


class PgLexicalIndex:
    def __init__(
        self,
        pool: asyncpg.Pool,
        memory: FactMemory | None = None,
        *,
        context_weight: float = CONTEXT_WEIGHT,
        snapshot: MemorySnapshot | None = None,
        shared: SharedSnapshot | None = None,
    ) -> None:
        self._pool = pool
        self.memory = memory
        self.context_weight = context_weight
        self._snapshot = snapshot if memory is not None else None
        # The writer's snapshot in the database, for a start without a file of its own.
        self._shared = shared if self._snapshot is not None else None
        # The key a snapshot of the memory is made under (None: none may be made of it) and
        # the change-log position it stands at (kept on the memory's thread): the rows past
        # it are what a restart from its snapshot reads.
        self._snapshot_key: SnapshotKey | None = None
        self._memory_position = 0
        # Where the last load came from: "documents", "snapshot" (its own file) or "shared
        # snapshot" (the writer's copy): tests, the bench.
        self.loaded_from = ""
        # The writer epoch this process claimed (None: it never claimed; a lone writer).
        self._writer_epoch: int | None = None
        self._executor = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-lexical")
            if memory is not None
            else None
        )

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def load(self) -> int:
        """Refills the memory from ``documents`` (start-up). Returns the change-log position
        the loaded memory reflects: the cursor in the same snapshot.

        One snapshot: a writer in another replica may commit meanwhile, and paging outside
        one let a re-upserted or erased row shift the pages and skip a document. A reusable
        memory snapshot stands for every row up to its position; a full refill leaves one."""
        if self.memory is None:
            return await self.cursor()
        async with self._pool.acquire() as conn, conn.transaction(
            isolation="repeatable_read", readonly=True
        ):
            state = await conn.fetchrow(
                "SELECT position, embedding, documents_epoch FROM index_state WHERE id"
            )
            position_loaded = int(state["position"])
            key = self._key(state["documents_epoch"], state["embedding"])
            restored, loaded_from = None, "documents"
            if key is not None and self._snapshot is not None:
                restored = await self._run(self._snapshot.read, key, position_loaded)
                loaded_from = "snapshot"
                if (
                    restored is None
                    and self._shared is not None
                    and await self._shared.fetch(conn, key, position_loaded, self._snapshot)
                ):
                    restored = await self._run(self._snapshot.read, key, position_loaded)
                    loaded_from = "shared snapshot"
            after: tuple[int, str] = (-1, "")
            if restored is not None:
                self.memory, snapshot_position = restored
                after = (snapshot_position + 1, "")  # every version id sorts after ''
            while True:
                rows = await conn.fetch(
                    "SELECT * FROM documents WHERE (change_position, version_id) > ($1, $2)"
                    " ORDER BY change_position, version_id LIMIT $3",
                    *after,
                    LOAD_BATCH,
                )
                if not rows:
                    break
                after = (rows[-1]["change_position"], rows[-1]["version_id"])
                by_position: dict[int, list[asyncpg.Record]] = {}
                for row in rows:
                    by_position.setdefault(row["change_position"], []).append(row)
                for position, group in by_position.items():
                    facts = [_fact_from_row(r) for r in group]
                    vectors = [
                        np.frombuffer(r["vector"], "<f4") if r["vector"] is not None else None
                        for r in group
                    ]
                    await self._run(self._upsert_memory, facts, vectors, position)
        self._snapshot_key = key
        self._memory_position = position_loaded
        self.loaded_from = "documents" if restored is None else loaded_from
        log.info("memory loaded from %s up to position %d", self.loaded_from, position_loaded)
        if restored is None and key is not None:
            await self.save_snapshot()
        return position_loaded

    def _key(self, documents_epoch: object, embedding: str | None) -> SnapshotKey | None:
        if self._snapshot is None or self.memory is None:
            return None
        return self._snapshot.key(str(documents_epoch), embedding, self.memory.dimensions)

    async def save_snapshot(self) -> int | None:
        """Writes the memory's snapshot if the documents are still those it holds (no
        erasure or re-embedding since it was loaded or replayed: either changes the
        epoch); returns the position written. Never raises: a snapshot only shortens the
        next start."""
        if self._snapshot_key is None or self._snapshot is None:
            return None
        try:
            state = await self._pool.fetchrow(
                "SELECT embedding, documents_epoch FROM index_state WHERE id"
            )
            key = self._key(state["documents_epoch"], state["embedding"])
            if key != self._snapshot_key:
                return None
            dumped = await self._run(self._dump_snapshot, key)
            if dumped is None:
                return None
            # Only the pickling needs the memory; queries need not wait for the disk.
            if not await asyncio.to_thread(self._snapshot.commit, dumped):
                return None  # an erasure came in between
            return dumped.position
        except Exception as exc:
            log.warning("memory snapshot not written (%s)", type(exc).__name__)
        return None

    async def keep_snapshots(self, every_seconds: float) -> None:
        """Writes a snapshot every ``every_seconds`` in which the memory moved on, so a
        replica that crashes restarts from a recent one, and (the writer, when sharing)
        publishes the latest for new replicas (runs until cancelled)."""
        written = self._memory_position
        while True:
            await asyncio.sleep(every_seconds)
            if self._memory_position != written:
                saved = await self.save_snapshot()
                written = written if saved is None else saved
            await self.publish_snapshot()

    async def publish_snapshot(self) -> int | None:
        """The writer copies its latest snapshot into the database for new replicas, unless
        that copy is there already; returns the position published. Never raises."""
        if self._shared is None or self._snapshot is None or self._writer_epoch is None:
            return None
        try:
            return await self._shared.publish(self._snapshot.path, self._writer_epoch)
        except Exception as exc:
            log.warning("memory snapshot not published (%s)", type(exc).__name__)
            return None

    def _dump_snapshot(self, key: SnapshotKey) -> Dumped | None:
        assert self.memory is not None and self._snapshot is not None
        if self._memory_position == 0:
            return None  # a restart from it would read every row anyway
        return self._snapshot.dump(self.memory, key, self._memory_position)

    def _replaying(self, key: SnapshotKey | None) -> None:
        """From the start of the log, under a new epoch."""
        self._memory_position = 0
        self._snapshot_key = key

    def _drop_scopes_holding(self, version_ids: list[str]) -> list[str]:
        assert self.memory is not None
        scopes = self.memory.drop_scopes_holding(version_ids)
        if scopes and self._snapshot is not None:
            self._snapshot.discard()  # it may hold the erased versions' text
        return scopes

    def _upsert_memory(self, facts, vectors, position: int) -> None:
        """Rows as ``documents`` holds them now (a load, a scope reloaded after erasure)."""
        assert self.memory is not None
        self.memory.upsert(facts, vectors, position)

    def _remember_page(self, facts, vectors, position: int) -> None:
        """A change-log page. One before where the memory stood is a replay from an earlier
        position (a follower's local shard, a vector store found empty, a re-embedding): the
        memory then stands there, since what it rewrote may be older than what it held and
        a restart from its snapshot must read every row past it again."""
        self._upsert_memory(facts, vectors, position)
        self._memory_position = position

    async def features(
        self,
        scope_ids: Sequence[str],
        version_ids: Sequence[str],
        vector: Sequence[float],
        query_text: str,
        query: IndexQuery | None = None,
    ) -> dict[str, CandidateFeatures]:
        if self.memory is None:
            return {}
        return await self._run(
            self.memory.features, scope_ids, version_ids, vector, query_text, query
        )

    async def close(self) -> None:
        """Leaves a snapshot of the memory for the next start, then stops its thread."""
        if self._executor is not None:
            await self.save_snapshot()
            self._executor.shutdown(wait=True)

    async def search(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        memory = self.memory
        if memory is not None:
            return await self._run(
                lambda: memory.search(text, query, limit, context_weight=self.context_weight)
            )
        return await self._search_pg(text, query, limit)

    async def _search_pg(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        args: list[object] = [text]
        where = _where(query, args)
        args.append(limit)
        sql = f"""
            WITH q AS ({_OR_QUERY})
            SELECT d.fact_key, d.version_id, ts_rank_cd(d.tsv, q.tsq) AS score
            FROM documents d, q
            WHERE q.tsq IS NOT NULL AND d.tsv @@ q.tsq AND {where}
            ORDER BY score DESC, d.version_id
            LIMIT ${len(args)}
        """
        rows = await self._pool.fetch(sql, *args)
        return [
            Candidate(fact_key=r["fact_key"], version_id=r["version_id"], score=float(r["score"]))
            for r in rows
            if r["score"] > 0
        ]

    async def has_documents(self, query: IndexQuery, *, with_attributes: bool) -> bool:
        args: list[object] = []
        where = _where(query, args, with_attributes=with_attributes)
        sql = f"SELECT EXISTS (SELECT 1 FROM documents d WHERE {where})"
        return bool(await self._pool.fetchval(sql, *args))

    async def apply(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        await self._apply_pg(facts, position, vectors)
        await self.remember(facts, position, vectors)

    async def remember(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float] | None] | None = None,
    ) -> None:
        if self.memory is not None and facts:
            await self._run(self._remember_page, list(facts), vectors, position)

    async def stored_vectors(self, version_ids: Sequence[str]) -> dict[str, list[float] | None]:
        rows = await self._pool.fetch(
            "SELECT version_id, vector FROM documents WHERE version_id = ANY($1::text[])",
            list(version_ids),
        )
        return {
            r["version_id"]: None
            if r["vector"] is None
            else np.frombuffer(r["vector"], "<f4").tolist()
            for r in rows
        }

    async def _apply_pg(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if facts:
                await conn.executemany(
                    """
                    INSERT INTO documents (
                        version_id, fact_key, scope_id, state, subject, predicate, object,
                        evidence, valid_from, valid_to, recorded_at, superseded_at, repository,
                        branch, code_path, document_type, source_type, trust_tier, authority,
                        change_position, source_id, locator, vector)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                            $16, $17, $18, $19, $20, $21, $22, $23)
                    ON CONFLICT (version_id) DO UPDATE SET
                        fact_key = EXCLUDED.fact_key, scope_id = EXCLUDED.scope_id,
                        state = EXCLUDED.state, subject = EXCLUDED.subject,
                        predicate = EXCLUDED.predicate, object = EXCLUDED.object,
                        evidence = EXCLUDED.evidence, valid_from = EXCLUDED.valid_from,
                        valid_to = EXCLUDED.valid_to, recorded_at = EXCLUDED.recorded_at,
                        superseded_at = EXCLUDED.superseded_at,
                        repository = EXCLUDED.repository, branch = EXCLUDED.branch,
                        code_path = EXCLUDED.code_path, document_type = EXCLUDED.document_type,
                        source_type = EXCLUDED.source_type, trust_tier = EXCLUDED.trust_tier,
                        authority = EXCLUDED.authority,
                        change_position = EXCLUDED.change_position,
                        source_id = EXCLUDED.source_id, locator = EXCLUDED.locator,
                        vector = COALESCE(EXCLUDED.vector, documents.vector)
                    """,
                    [
                        (
                            f.version_id,
                            f.fact_key,
                            f.scope_id,
                            int(f.state),
                            f.subject,
                            f.predicate,
                            f.object,
                            evidence_text(f),
                            f.valid_from,
                            f.valid_to,
                            f.recorded_at,
                            f.superseded_at,
                            f.repository,
                            f.branch,
                            f.code_path,
                            f.document_type,
                            f.source_type,
                            f.trust_tier,
                            f.authority,
                            position,
                            f.citations[0].source_id if f.citations else "",
                            f.citations[0].locator if f.citations else "",
                            _vector_bytes(vectors[i] if vectors is not None else None),
                        )
                        for i, f in enumerate(facts)
                    ],
                )
                # A new current version supersedes the older current ones of its key.
                superseding = [
                    (f.fact_key, f.version_id, f.recorded_at, int(FactState.SUPERSEDED))
                    for f in facts
                    if f.superseded_at is None and f.recorded_at is not None
                ]
                if superseding:
                    await conn.executemany(
                        """
                        UPDATE documents SET state = $4, superseded_at = $3
                        WHERE fact_key = $1 AND version_id <> $2 AND superseded_at IS NULL
                          AND recorded_at < $3
                        """,
                        superseding,
                    )
            _fenced_unless_moved(  # raising here rolls the page back
                await conn.execute(
                    "UPDATE index_state SET position = $1, updated_at = now()"
                    f" WHERE id AND {_STILL_WRITER}",
                    position,
                    self._writer_epoch,
                )
            )

    async def cursor(self) -> int:
        return int(await self._pool.fetchval("SELECT position FROM index_state WHERE id"))

    async def indexed_embedding(self) -> str | None:
        value = await self._pool.fetchval("SELECT embedding FROM index_state WHERE id")
        return None if value is None else str(value)

    async def restart_for_embedding(self, embedding: str) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval(
                "UPDATE index_state SET position = 0, embedding = $1,"
                " documents_epoch = gen_random_uuid(), updated_at = now()"
                f" WHERE id AND {_STILL_WRITER} RETURNING documents_epoch",
                embedding,
                self._writer_epoch,
            )
            if epoch is not None:
                await purge(conn)
        if epoch is None:
            raise WriterFenced("another replica writes the index")
        if self.memory is not None:
            await self._run(self._replaying, self._key(epoch, embedding))

    async def claim_writer(self) -> None:
        self._writer_epoch = int(
            await self._pool.fetchval(
                "UPDATE index_state SET writer_epoch = writer_epoch + 1 WHERE id"
                " RETURNING writer_epoch"
            )
        )

    async def check_writer(self) -> None:
        if self._writer_epoch is None:
            return
        current = await self._pool.fetchval("SELECT writer_epoch FROM index_state WHERE id")
        if current != self._writer_epoch:
            raise WriterFenced("another replica writes the index")

    async def delete(self, version_ids: Sequence[str]) -> None:
        """Erasure: deletes the documents, then rebuilds the memory of the scopes that held
        them from what stays in ``documents``."""
        ids = list(version_ids)
        if not ids:
            return
        # A new epoch only when rows went: a replay past an old erasure deletes nothing.
        async with self._pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval(
                "WITH gone AS (DELETE FROM documents WHERE version_id = ANY($1::text[])"
                " RETURNING 1), bumped AS (UPDATE index_state SET documents_epoch ="
                " gen_random_uuid() WHERE id AND EXISTS (SELECT 1 FROM gone)"
                " RETURNING documents_epoch) SELECT documents_epoch FROM bumped",
                ids,
            )
            if epoch is not None:
                # A statement of its own: it sees a copy that committed while the one above
                # waited for index_state's row (shared_snapshot.publish).
                await purge(conn)
        await self.forget(ids)
        if epoch is not None and self.memory is not None:
            # The writer made this epoch and its memory now holds what documents hold:
            # its snapshots go on under it (a follower's cannot know it saw the last one).
            await self._run(self._adopt_epoch, epoch)

    def _adopt_epoch(self, epoch: object) -> None:
        if self._snapshot_key is not None:
            self._snapshot_key = replace(self._snapshot_key, documents_epoch=str(epoch))

    async def forget(self, version_ids: Sequence[str]) -> None:
        """Drops the memory of the scopes that held the versions and reloads them from what
        stays in ``documents``."""
        ids = list(version_ids)
        if self.memory is None or not ids:
            return
        scopes = await self._run(self._drop_scopes_holding, ids)
        if not scopes:
            return
        rows = await self._pool.fetch(
            "SELECT * FROM documents WHERE scope_id = ANY($1::text[])"
            " ORDER BY change_position, version_id",
            scopes,
        )
        by_position: dict[int, list[asyncpg.Record]] = {}
        for row in rows:
            by_position.setdefault(row["change_position"], []).append(row)
        for position, group in by_position.items():
            vectors = [
                np.frombuffer(r["vector"], "<f4") if r["vector"] is not None else None
                for r in group
            ]
            await self._run(
                self._upsert_memory, [_fact_from_row(r) for r in group], vectors, position
            )


def _fenced_unless_moved(status: str) -> None:
    if status != "UPDATE 1":
        raise WriterFenced("another replica writes the index")


def _fact_from_row(row: asyncpg.Record) -> Fact:
    citations: tuple[Citation, ...] = ()
    if row["source_id"] or row["locator"] or row["evidence"]:
        citations = (
            Citation(source_id=row["source_id"], locator=row["locator"], excerpt=row["evidence"]),
        )
    return Fact(
        fact_key=row["fact_key"],
        version_id=row["version_id"],
        scope_id=row["scope_id"],
        subject=row["subject"],
        predicate=row["predicate"],
        object=row["object"],
        state=FactState(row["state"]),
        trust_tier=row["trust_tier"],
        authority=row["authority"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        recorded_at=row["recorded_at"],
        superseded_at=row["superseded_at"],
        repository=row["repository"],
        branch=row["branch"],
        code_path=row["code_path"],
        document_type=row["document_type"],
        source_type=row["source_type"],
        citations=citations,
    )
