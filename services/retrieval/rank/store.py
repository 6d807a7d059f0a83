"""Ranking models in PostgreSQL (retrieval.rank_models, rank_generation): the asyncpg
side of learned.py."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from vera.services.retrieval.rank.learned import (
    METRIC,
    Figures,
    FitOutcome,
    FitReport,
    Guard,
    LinearRanker,
    NotServed,
    RankRecord,
    UnservableModel,
)

log = logging.getLogger(__name__)

_COLUMNS = (
    "model_id, scope_id, outcome, active, training_rows, training_queries, evaluated_packs,"
    " metric, model_figure, hand_figure, newest_feedback_at, parameters, trained_at,"
    " model_hit, hand_hit, model_recall, hand_recall, replayed_queries, watched_since,"
    " switched_off_at, guard"
)
_SAME_SCOPE = "scope_id IS NOT DISTINCT FROM $1::uuid"


def _scope(scope_id: str | None) -> uuid.UUID | None:
    return uuid.UUID(scope_id) if scope_id else None


def _ranker(model_id: str, parameters: Any) -> tuple[LinearRanker | None, NotServed | None]:
    if not parameters:
        return None, None
    try:
        return LinearRanker.from_parameters(model_id, parameters), None
    except UnservableModel as refused:
        # Fitted on another feature set (an older release): it cannot serve; the hand-set
        # ranking does until the next fit, and status says why.
        log.warning("ranking model %s not served: %s", model_id, refused.reason.value)
        return None, refused.reason


def _figures(stored: Any) -> Figures:
    return Figures(
        int(stored["queries"]),
        float(stored["hit"]),
        float(stored["recall"]),
        float(stored["mrr"]),
    )


def _guard(row: Any) -> Guard | None:
    if row["switched_off_at"] is None or not row["guard"]:
        return None
    return Guard(
        _figures(row["guard"]["model"]), _figures(row["guard"]["hand"]), row["switched_off_at"]
    )


def _stored_figures(figures: Figures) -> dict[str, float]:
    return {
        "queries": figures.queries,
        "hit": figures.hit,
        "recall": figures.recall,
        "mrr": figures.mrr,
    }


def _record(row: Any) -> RankRecord:
    model_id = str(row["model_id"])
    ranker, not_served = _ranker(model_id, row["parameters"])
    return RankRecord(
        model_id=model_id,
        scope_id=str(row["scope_id"]) if row["scope_id"] else None,
        outcome=FitOutcome(row["outcome"]),
        active=row["active"],
        training_rows=row["training_rows"],
        training_queries=row["training_queries"],
        evaluated_packs=row["evaluated_packs"],
        model_figure=row["model_figure"],
        hand_figure=row["hand_figure"],
        trained_at=row["trained_at"],
        newest_feedback_at=row["newest_feedback_at"],
        ranker=ranker,
        metric=row["metric"],
        model_hit=row["model_hit"],
        hand_hit=row["hand_hit"],
        not_served=not_served,
        model_recall=row["model_recall"],
        hand_recall=row["hand_recall"],
        replayed_queries=row["replayed_queries"],
        watched_since=row["watched_since"],
        switched_off=_guard(row),
    )


class RankStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record_fit(
        self, scope_id: str | None, report: FitReport, newest_feedback_at: datetime | None
    ) -> RankRecord:
        """Stores the fit; an activated one replaces the scope's active model in the same
        transaction, which also bumps the generation serving processes poll."""
        model_id = report.ranker.model_id if report.ranker else str(uuid.uuid4())
        async with self._pool.acquire() as conn, conn.transaction():
            if report.activate:
                # The generation row first: its lock orders concurrent activations (another
                # replica's, another operator's), so this UPDATE sees the model a concurrent
                # one committed and the one-active index never refuses the INSERT.
                await _bump(conn)
                await conn.execute(
                    f"UPDATE rank_models SET active = false WHERE active AND {_SAME_SCOPE}",
                    _scope(scope_id),
                )
            row = await conn.fetchrow(
                f"""INSERT INTO rank_models (model_id, scope_id, outcome, active, training_rows,
                       training_queries, evaluated_packs, metric, model_figure, hand_figure,
                       newest_feedback_at, parameters, model_hit, hand_hit, model_recall,
                       hand_recall, replayed_queries, watched_since)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14,
                       $15, $16, $17, CASE WHEN $4 THEN now() END)
                   RETURNING {_COLUMNS}""",
                uuid.UUID(model_id),
                _scope(scope_id),
                report.outcome.value,
                report.activate,
                report.training_rows,
                report.training_queries,
                report.evaluated_packs,
                METRIC,
                report.model.mrr,
                report.hand.mrr,
                newest_feedback_at,
                report.ranker.parameters() if report.ranker else None,
                report.model.hit,
                report.hand.hit,
                report.model.recall,
                report.hand.recall,
                report.model.queries,
            )
        return _record(row)

    async def deactivate(self, scope_id: str | None) -> RankRecord | None:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""UPDATE rank_models SET active = false WHERE active AND {_SAME_SCOPE}
                    RETURNING {_COLUMNS}""",
                _scope(scope_id),
            )
            if row is not None:
                await _bump(conn)
        return _record(row) if row is not None else None

    async def switch_off(self, model_id: str, guard: Guard) -> RankRecord | None:
        """The serving check's verdict: the model stops serving, with when and why; None
        when it no longer served (turned off or replaced meanwhile)."""
        figures = {"model": _stored_figures(guard.model), "hand": _stored_figures(guard.hand)}
        async with self._pool.acquire() as conn, conn.transaction():
            await _bump(conn)
            row = await conn.fetchrow(
                f"""UPDATE rank_models SET active = false, switched_off_at = $2, guard = $3::jsonb
                    WHERE model_id = $1 AND active RETURNING {_COLUMNS}""",
                uuid.UUID(model_id),
                guard.checked_at,
                figures,
            )
        return _record(row) if row is not None else None

    async def enable(self, scope_id: str | None) -> RankRecord | None:
        """Serves the scope's model switched off last again, in place of any active one,
        watched afresh from now; None when the check never switched one off."""
        async with self._pool.acquire() as conn, conn.transaction():
            await _bump(conn)  # first: orders concurrent activations (see record_fit)
            target = await conn.fetchval(
                f"""SELECT model_id FROM rank_models
                    WHERE {_SAME_SCOPE} AND switched_off_at IS NOT NULL AND NOT active
                    ORDER BY switched_off_at DESC LIMIT 1""",
                _scope(scope_id),
            )
            if target is None:
                return None
            await conn.execute(
                f"UPDATE rank_models SET active = false WHERE active AND {_SAME_SCOPE}",
                _scope(scope_id),
            )
            row = await conn.fetchrow(
                f"""UPDATE rank_models SET active = true, watched_since = now(),
                        switched_off_at = NULL, guard = NULL
                    WHERE model_id = $1 RETURNING {_COLUMNS}""",
                target,
            )
        return _record(row)

    async def last_switched_off(self, scope_id: str | None) -> RankRecord | None:
        row = await self._pool.fetchrow(
            f"""SELECT {_COLUMNS} FROM rank_models
                WHERE {_SAME_SCOPE} AND switched_off_at IS NOT NULL
                ORDER BY switched_off_at DESC LIMIT 1""",
            _scope(scope_id),
        )
        return _record(row) if row is not None else None

    async def active(self) -> list[RankRecord]:
        rows = await self._pool.fetch(f"SELECT {_COLUMNS} FROM rank_models WHERE active")
        return [_record(r) for r in rows]

    async def last_fit(self, scope_id: str | None) -> RankRecord | None:
        row = await self._pool.fetchrow(
            f"""SELECT {_COLUMNS} FROM rank_models WHERE {_SAME_SCOPE}
                ORDER BY trained_at DESC, model_id LIMIT 1""",
            _scope(scope_id),
        )
        return _record(row) if row is not None else None

    async def activated_ids(self, scope_id: str | None) -> list[str]:
        """Every model ever activated deployment-wide or for ``scope_id``, active or not:
        the only ones a snapshot of that scope can have been taken with."""
        rows = await self._pool.fetch(
            """SELECT model_id FROM rank_models
               WHERE outcome = 'activated' AND (scope_id IS NULL OR scope_id = $1::uuid)""",
            _scope(scope_id),
        )
        return [str(r["model_id"]) for r in rows]

    async def model(self, model_id: str) -> RankRecord | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM rank_models WHERE model_id = $1", uuid.UUID(model_id)
        )
        return _record(row) if row is not None else None

    async def generation(self) -> int:
        return int(await self._pool.fetchval("SELECT generation FROM rank_generation"))


async def _bump(conn: asyncpg.Connection) -> None:
    await conn.execute("UPDATE rank_generation SET generation = generation + 1")
