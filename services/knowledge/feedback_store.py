"""The asyncpg adapter of retrieval feedback: recording a signal and paging the ranking
training rows.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from .domain import ChangeKind
from .feedback import FeedbackIn, FeedbackView, RankingFeedbackRow
from .outbox import (
    Outbox,
)
from .store import KnowledgeStore

# A capped feedback page counts this many times its size of older rows first, widening
# by _WIDEN while the cap leaves the page short.
_FIRST_SPAN = 2
_WIDEN = 4


class FeedbackStore:
    """Feedback rows; shares the fact reads' pool."""

    def __init__(self, facts: KnowledgeStore) -> None:
        self._pool = facts.pool
        self._facts = facts

    async def record_feedback(self, fb: FeedbackIn) -> FeedbackView:
        # No actor: feedback is personal, its entry may sit in a shared scope, and erasing
        # the principal must leave nothing there that names them.
        outbox = Outbox()
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                """INSERT INTO retrieval_feedback (feedback_id, principal_id, scope_id, pack_id,
                       result_ref, signal, query, rank, signal_vector, fact_key,
                       attribution, pack_scope_id)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12)
                   ON CONFLICT (principal_id, pack_id, result_ref) DO NOTHING
                   RETURNING feedback_id, signal, recorded_at""",
                uuid.uuid4(),
                fb.principal_id,
                fb.scope_id,
                fb.pack_id,
                fb.result_ref,
                fb.signal,
                fb.query,
                fb.rank,
                fb.signal_vector,
                fb.fact_key,
                fb.attribution,
                fb.pack_scope_id,
            )
            created = row is not None
            if row is None:
                row = await conn.fetchrow(
                    """SELECT feedback_id, signal, recorded_at FROM retrieval_feedback
                       WHERE principal_id = $1 AND pack_id = $2 AND result_ref = $3""",
                    fb.principal_id,
                    fb.pack_id,
                    fb.result_ref,
                )
            else:
                outbox.add(ChangeKind.FEEDBACK_RECORDED, fb.scope_id, ref=str(row["feedback_id"]))
            await outbox.flush(conn)
        return FeedbackView(row["feedback_id"], row["signal"], created, row["recorded_at"])

    async def list_ranking_feedback(
        self,
        pack_scope_id: uuid.UUID | None,
        recorded_after: datetime | None,
        before_seq: int | None,
        limit: int,
        per_principal: int | None = None,
    ) -> list[RankingFeedbackRow]:
        """Result-level rows only (the signal vector is the server's), newest first; with
        ``per_principal``, only each principal's newest that many of the rows the filters
        select (counted before paging, so pages agree). Rows of an erased principal are
        gone (erasure deletes them), so no later fit sees them."""
        eligible = _TrainingRows(pack_scope_id, recorded_after)
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            if per_principal is None:
                seqs = await conn.fetch(*eligible.page(before_seq, limit))
            else:
                seqs = await _capped_page(conn, eligible, before_seq, limit, per_principal)
            rows = await conn.fetch(
                """SELECT feedback_id, pack_id,
                          encode(sha256(convert_to(query, 'UTF8')), 'hex') AS query_digest,
                          rank, signal, signal_vector, recorded_at, seq, query, fact_key,
                          pack_scope_id
                   FROM retrieval_feedback
                   WHERE attribution = 'result' AND seq = ANY($1::bigint[])
                   ORDER BY seq DESC""",
                [r["seq"] for r in seqs],
            )
        return [
            RankingFeedbackRow(
                feedback_id=r["feedback_id"],
                pack_id=r["pack_id"],
                query_digest=r["query_digest"][:32],
                rank=r["rank"],
                signal=r["signal"],
                signal_vector={k: float(v) for k, v in (r["signal_vector"] or {}).items()},
                recorded_at=r["recorded_at"],
                seq=r["seq"],
                query=r["query"],
                fact_key=r["fact_key"],
                pack_scope_id=r["pack_scope_id"],
            )
            for r in rows
        ]


# Ranking feedback pages ------------------------------------------------------------------
# A page reads the covering indexes of migration 0010 (seq, principal, scope, time) and
# fetches the full rows, query digest included, only for the page itself.


@dataclasses.dataclass(frozen=True)
class _TrainingRows:
    """The rows ListRankingFeedback's filters select. Each filter is in the SQL only when
    asked for, so the planner sees a plain ``pack_scope_id = $n`` and can use the scoped
    index instead of a generic plan over every scope."""

    pack_scope_id: uuid.UUID | None
    recorded_after: datetime | None

    def where(self, args: list[Any]) -> str:
        clauses = ["attribution = 'result'"]
        if self.pack_scope_id is not None:
            args.append(self.pack_scope_id)
            clauses.append(f"pack_scope_id = ${len(args)}")
        if self.recorded_after is not None:
            args.append(self.recorded_after)
            clauses.append(f"recorded_at >= ${len(args)}")
        return " AND ".join(clauses)

    def below(self, args: list[Any], before_seq: int | None) -> str:
        """The filters, and below the cursor when there is one."""
        where = self.where(args)
        if before_seq is not None:
            args.append(before_seq)
            where += f" AND seq < ${len(args)}"
        return where

    def page(self, before_seq: int | None, limit: int) -> tuple[Any, ...]:
        """The newest ``limit`` rows' seqs below the cursor."""
        args: list[Any] = []
        where = self.below(args, before_seq)
        args.append(limit)
        sql = f"""SELECT seq FROM retrieval_feedback WHERE {where}
                  ORDER BY seq DESC LIMIT ${len(args)}"""
        return sql, *args

    def capped(
        self, since_seq: int | None, before_seq: int | None, limit: int, per_principal: int
    ) -> tuple[Any, ...]:
        """The newest ``limit`` seqs below the cursor among each principal's newest
        ``per_principal`` rows, counting only rows from ``since_seq`` on. Exact for every
        row at or above ``since_seq``: a row's place among its principal's rows depends
        only on the rows newer than it."""
        args: list[Any] = []
        where = self.where(args)
        if since_seq is not None:
            args.append(since_seq)
            where += f" AND seq >= ${len(args)}"
        args.append(per_principal)
        keep = f"principal_nth <= ${len(args)}"
        if before_seq is not None:
            args.append(before_seq)
            keep += f" AND seq < ${len(args)}"
        args.append(limit)
        sql = f"""SELECT seq FROM (
                      SELECT seq, row_number() OVER (PARTITION BY principal_id ORDER BY seq DESC)
                                 AS principal_nth
                      FROM retrieval_feedback WHERE {where}) AS counted
                  WHERE {keep} ORDER BY seq DESC LIMIT ${len(args)}"""
        return sql, *args

    def nth_below(self, before_seq: int | None, nth: int) -> tuple[Any, ...]:
        """The seq of the ``nth`` newest row below the cursor (None: fewer rows)."""
        args: list[Any] = []
        where = self.below(args, before_seq)
        args.append(nth - 1)
        sql = f"""SELECT seq FROM retrieval_feedback WHERE {where}
                  ORDER BY seq DESC OFFSET ${len(args)} LIMIT 1"""
        return sql, *args


async def _capped_page(
    conn: asyncpg.Connection,
    eligible: _TrainingRows,
    before_seq: int | None,
    limit: int,
    per_principal: int,
) -> list[Any]:
    """The page under the per-principal cap without counting every row the filters
    select: count only the rows from the cursor's ``span``-th older row on (every row
    above the page, so each principal's count is exact there); a span that held fewer
    than ``limit`` rows within the cap is widened until the page fills or no older row
    is left. In the caller's one snapshot, so the widening sees the same rows."""
    span = _FIRST_SPAN * limit
    while True:
        since = await conn.fetchval(*eligible.nth_below(before_seq, span))
        seqs = await conn.fetch(*eligible.capped(since, before_seq, limit, per_principal))
        if len(seqs) >= limit or since is None:
            return seqs
        span *= _WIDEN
