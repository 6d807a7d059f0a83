"""``retrieval.documents``: the durable copy of every indexed fact version (text,
attributes, first citation, vector), its shared filter, and the PostgreSQL-only lexical
leg over it (the OR of the query's English lexemes ranked by ts_rank_cd over the fact,
weight A, and its evidence, weight B)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import numpy as np

from vera.services.retrieval.domain import Candidate, Citation, Fact, FactState, IndexQuery
from vera.services.retrieval.memory.snapshot_shared import purge

# The OR of the query's lexemes, each quoted for tsquery input ('' and \ escaped).
_OR_QUERY = r"""
    SELECT (string_agg(
                '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | '
            ))::tsquery AS tsq
    FROM unnest(to_tsvector('english'::regconfig, $1::text))
"""


def where(query: IndexQuery, args: list[object], *, with_attributes: bool = True) -> str:
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


def stored_vector(row: asyncpg.Record) -> np.ndarray | None:
    return np.frombuffer(row["vector"], "<f4") if row["vector"] is not None else None


def by_position(rows: Sequence[asyncpg.Record]) -> dict[int, list[asyncpg.Record]]:
    """Rows grouped by the change-log position that wrote them, in order."""
    grouped: dict[int, list[asyncpg.Record]] = {}
    for row in rows:
        grouped.setdefault(row["change_position"], []).append(row)
    return grouped


def fact_from_row(row: asyncpg.Record) -> Fact:
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


class PgDocuments:
    """The rows of ``documents``: written by the index writer, read back to fill memory."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def upsert(
        self,
        conn: asyncpg.Connection,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float]] | None,
    ) -> None:
        """Within the caller's transaction (the one that advances the cursor)."""
        if not facts:
            return
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

    async def delete(self, version_ids: list[str]) -> object | None:
        """Erasure: deletes the rows and, when any went, moves ``documents_epoch`` on and
        deletes the shared snapshot in the same transaction; returns the new epoch (None:
        nothing was deleted, as on a replay past an old erasure)."""
        async with self._pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval(
                "WITH gone AS (DELETE FROM documents WHERE version_id = ANY($1::text[])"
                " RETURNING 1), bumped AS (UPDATE index_state SET documents_epoch ="
                " gen_random_uuid() WHERE id AND EXISTS (SELECT 1 FROM gone)"
                " RETURNING documents_epoch) SELECT documents_epoch FROM bumped",
                version_ids,
            )
            if epoch is not None:
                # A statement of its own: it sees a copy that committed while the one above
                # waited for index_state's row (memory/snapshot_shared.py's publish).
                await purge(conn)
        return epoch

    @staticmethod
    async def page_after(
        conn: asyncpg.Connection, after: tuple[int, str], limit: int
    ) -> list[asyncpg.Record]:
        """The next ``limit`` rows in change order after (position, version id)."""
        return await conn.fetch(
            "SELECT * FROM documents WHERE (change_position, version_id) > ($1, $2)"
            " ORDER BY change_position, version_id LIMIT $3",
            *after,
            limit,
        )

    async def of_scopes(self, scope_ids: list[str]) -> list[asyncpg.Record]:
        return await self._pool.fetch(
            "SELECT * FROM documents WHERE scope_id = ANY($1::text[])"
            " ORDER BY change_position, version_id",
            scope_ids,
        )

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

    async def any_live(self, query: IndexQuery, *, with_attributes: bool) -> bool:
        args: list[object] = []
        clause = where(query, args, with_attributes=with_attributes)
        sql = f"SELECT EXISTS (SELECT 1 FROM documents d WHERE {clause})"
        return bool(await self._pool.fetchval(sql, *args))


class PgTextSearch:
    """The lexical leg without an in-process memory: full-text search in PostgreSQL."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def search(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        args: list[object] = [text]
        clause = where(query, args)
        args.append(limit)
        sql = f"""
            WITH q AS ({_OR_QUERY})
            SELECT d.fact_key, d.version_id, ts_rank_cd(d.tsv, q.tsq) AS score
            FROM documents d, q
            WHERE q.tsq IS NOT NULL AND d.tsv @@ q.tsq AND {clause}
            ORDER BY score DESC, d.version_id
            LIMIT ${len(args)}
        """
        rows = await self._pool.fetch(sql, *args)
        return [
            Candidate(fact_key=r["fact_key"], version_id=r["version_id"], score=float(r["score"]))
            for r in rows
            if r["score"] > 0
        ]
