"""The asyncpg adapter of citation drift: the lines facts cite from a repository's files,
and the marks `vera harvest` records when those lines change at a later commit.

A mark lives on the assertion (one source supporting one fact): ``store`` reads it into
each citation, served ``stale`` with the mark's reason. A mark is set or cleared only on
a verified assertion of a current active fact, and each change tells the indexes to
re-read the fact (``outbox``), so served citations follow at once.
"""

from __future__ import annotations

import uuid

from vera import page_tokens

from .domain import ChangeKind, CitedLinesRow, DriftMark
from .outbox import Outbox, lock_keys
from .store import KnowledgeStore

DRIFT_REASONS = frozenset({"lines_changed", "lines_vanished"})
PAGE_DEFAULT, PAGE_MAX = 500, 1000
MAX_MARKS = 1000

class DriftStore:
    def __init__(self, store: KnowledgeStore) -> None:
        self._pool = store.pool

    async def cited_lines(self, scope_id: uuid.UUID, prefix: str, drifted_only: bool,
                          page_size: int, offset: int) -> tuple[list[CitedLinesRow], str]:
        """One page by source id and fact key; the citation's first evidence, as served."""
        drifted = "AND a.drift_reason <> ''" if drifted_only else ""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(_page_sql(drifted), scope_id, prefix, page_size + 1, offset)
        page = [CitedLinesRow(r["fact_key"], r["source_id"], r["locator"], r["evidence"],
                              r["subject"], r["predicate"], r["object"], r["drift_reason"],
                              r["drift_commit"], r["drift_detected_at"])
                for r in rows[:page_size]]
        more = len(rows) > page_size
        return page, page_tokens.encode_position(offset + len(page)) if more else ""

    async def record(self, curator_id: uuid.UUID, scope_id: uuid.UUID, commit: str,
                     marks: list[DriftMark]) -> tuple[int, int]:
        """(marked, cleared): marks that changed something; the rest were already so."""
        outbox = Outbox(actor_id=curator_id)
        marked = cleared = 0
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, sorted({m.fact_key for m in marks}))
            for mark in marks:
                row = await conn.fetchrow(
                    """UPDATE assertions a SET drift_reason = $4,
                               drift_commit = CASE WHEN $4 = '' THEN '' ELSE $5 END,
                               drift_detected_at = CASE WHEN $4 = '' THEN NULL ELSE now() END
                          FROM sources s, facts f
                         WHERE s.source_pk = a.source_pk AND s.scope_id = $1
                           AND s.source_id = $3 AND a.fact_key = $2 AND a.scope_id = $1
                           AND a.status = 'verified' AND a.drift_reason <> $4
                           AND f.fact_key = a.fact_key AND f.superseded_at IS NULL
                           AND f.state = 'ACTIVE'
                        RETURNING f.version_id""",
                    scope_id, mark.fact_key, mark.source_id, mark.reason, commit)
                if row is None:
                    continue
                if mark.reason:
                    marked += 1
                else:
                    cleared += 1
                outbox.add(ChangeKind.FACT_UPSERTED, scope_id, version_id=row["version_id"])
            await outbox.flush(conn)
        return marked, cleared


def _page_sql(drifted: str) -> str:
    return f"""SELECT DISTINCT ON (s.source_id, a.fact_key)
                      a.fact_key, s.source_id, f.subject, f.predicate, f.object,
                      a.drift_reason, a.drift_commit, a.drift_detected_at,
                      coalesce(e.locator, '') AS locator, coalesce(e.text, '') AS evidence
               FROM assertions a
               JOIN sources s ON s.source_pk = a.source_pk
               JOIN facts f ON f.fact_key = a.fact_key AND f.superseded_at IS NULL
                           AND f.state = 'ACTIVE'
               LEFT JOIN LATERAL (
                   SELECT locator, text FROM evidence
                    WHERE assertion_id = a.assertion_id
                    ORDER BY recorded_at, evidence_id LIMIT 1) e ON true
               WHERE a.scope_id = $1 AND a.status = 'verified' AND a.supports
                 AND starts_with(s.source_id, $2) {drifted}
               ORDER BY s.source_id, a.fact_key, a.recorded_at
               LIMIT $3 OFFSET $4"""
