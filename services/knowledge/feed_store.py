"""The asyncpg adapter of what changed: the scoped change feed (the ledger as a reader
sees it) and a source as recorded at a time boundary.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from vera.errors import InvalidInput

from . import domain
from .domain import ChangeKind, ScopeChangeView
from .graph import (
    SourceDetail,
    SourceVersionView,
    freshness,
)
from .store import KnowledgeStore

# What one ledger entry means to a reader of the feed (``graph.CHANGE_KINDS``), over
# ``outbox o`` and its fact version ``v``; in SQL, so a filter by kind keeps cursors exact.
_CHANGE_KIND = """CASE
    WHEN o.kind = 'source_upserted' THEN 'source_updated'
    WHEN EXISTS (SELECT 1 FROM outbox p WHERE p.version_id = o.version_id
                 AND p.position < o.position) THEN 'evidence_added'
    WHEN v.state = 'PROPOSED' THEN 'proposed'
    WHEN v.state = 'RETRACTED' THEN 'retracted'
    WHEN v.state = 'SUPERSEDED' OR v.superseded_by <> '' THEN 'corrected'
    WHEN v.corrects <> '' THEN 'correction'
    ELSE 'published' END"""


class FeedStore:
    """The change feed and sources; shares the fact reads' pool."""

    def __init__(self, store: KnowledgeStore) -> None:
        self._store = store
        self._pool = store.pool
        self._ontology = store.ontology

    # --- change feed --------------------------------------------------------------------

    async def list_scope_changes(
        self,
        scope_ids: Sequence[uuid.UUID],
        after: int,
        page_size: int,
        as_of: datetime | None = None,
        known_as_of: datetime | None = None,
        *,
        newest_first: bool = False,
        changes: Sequence[str] = (),
    ) -> tuple[list[ScopeChangeView], int, bool]:
        """Ledger entries after ``after`` (before it, from the head when 0, with
        ``newest_first``). ``known_as_of``: only entries recorded at or before it (the
        ledger as it stood then). ``as_of``: only entries whose fact version was valid at
        that instant; source entries have no valid time and always pass. ``changes``: only
        those kinds (``graph.CHANGE_KINDS``). Filters, the classification included, apply
        in SQL, so the cursor (a ledger position) stays exact."""
        beyond = "($2 = 0 OR o.position < $2)" if newest_first else "o.position > $2"
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            rows = await conn.fetch(
                f"""SELECT * FROM (
                       SELECT o.position, o.kind, o.version_id, o.scope_id, o.ref, o.created_at,
                              o.actor_id, {_CHANGE_KIND} AS change
                       FROM outbox o LEFT JOIN facts v ON v.version_id = o.version_id
                       WHERE o.scope_id = ANY($1::uuid[]) AND {beyond}
                         AND o.kind IN ('fact_upserted', 'source_upserted')
                         AND ($4::timestamptz IS NULL OR o.created_at <= $4)
                         AND ($5::timestamptz IS NULL OR o.version_id IS NULL OR (
                             v.version_id IS NOT NULL
                             AND (v.valid_from IS NULL OR v.valid_from <= $5)
                             AND (v.valid_to IS NULL OR v.valid_to > $5)))) c
                   WHERE cardinality($6::text[]) = 0 OR c.change = ANY($6::text[])
                   ORDER BY c.position {"DESC" if newest_first else ""} LIMIT $3""",
                list(scope_ids),
                after,
                page_size + 1,
                known_as_of,
                as_of,
                list(changes),
            )
            more = len(rows) > page_size
            rows = rows[:page_size]
            version_ids = [r["version_id"] for r in rows if r["version_id"] is not None]
            facts = (
                {
                    v.version_id: v
                    for v in await self._store.facts(
                        conn, version_ids=version_ids, known_as_of=known_as_of, live_only=False
                    )
                }
                if version_ids
                else {}
            )
        out = []
        for r in rows:
            fact = facts.get(r["version_id"]) if r["version_id"] is not None else None
            if fact is None and r["kind"] != ChangeKind.SOURCE_UPSERTED.value:
                continue
            out.append(
                ScopeChangeView(
                    position=r["position"],
                    change=r["change"],
                    scope_id=r["scope_id"],
                    fact=fact,
                    source_id=r["ref"] if fact is None else "",
                    created_at=r["created_at"],
                    actor_id=r["actor_id"],
                )
            )
        last = rows[-1]["position"] if rows else after
        return out, last, more

    # --- sources ------------------------------------------------------------------------

    async def get_source(
        self,
        scope_ids: Sequence[uuid.UUID],
        source_id: str,
        known_as_of: datetime | None,
        stale_after_days: int,
        as_of: datetime | None = None,
    ) -> SourceDetail:
        """A source as recorded by ``known_as_of`` (artifact versions recorded then) and as
        observed by ``as_of`` (artifact versions observed at or before it). The latest
        remaining version is the source; ``cited_by_facts`` counts live facts current at
        ``known_as_of`` and valid at ``as_of`` that a non-withdrawn assertion of the source
        supported then. Freshness is that version's age today."""
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            rows = await conn.fetch(
                """SELECT source_pk, scope_id FROM sources
                   WHERE scope_id = ANY($1::uuid[]) AND source_id = $2 ORDER BY scope_id""",
                list(scope_ids),
                source_id,
            )
            if not rows:
                raise InvalidInput("source_id", "no such source in scope", reason="not_found")
            if len(rows) > 1:
                raise InvalidInput(
                    "source_id",
                    "source id exists in several projects",
                    reason="ambiguous",
                    candidates_json=json.dumps(
                        [{"source_id": source_id, "scope_id": str(r["scope_id"])} for r in rows],
                        separators=(",", ":"),
                    ),
                )
            pk, scope = rows[0]["source_pk"], rows[0]["scope_id"]
            versions = await conn.fetch(
                """SELECT * FROM source_versions
                   WHERE source_pk = $1 AND recorded_at <= coalesce($2::timestamptz, now())
                     AND ($3::timestamptz IS NULL OR observed_at <= $3)
                   ORDER BY version DESC""",
                pk,
                known_as_of,
                as_of,
            )
            if not versions:
                raise InvalidInput("source_id", "not recorded yet", reason="not_found")
            cited = await conn.fetchval(
                """SELECT count(DISTINCT f.fact_key) FROM assertions a
                   JOIN facts f ON f.fact_key = a.fact_key
                   WHERE a.source_pk = $1 AND a.status <> 'pending'
                     AND f.state IN ('ACTIVE', 'PROPOSED')
                     AND CASE WHEN $2::timestamptz IS NULL
                         THEN a.status = 'verified' AND f.superseded_at IS NULL
                         ELSE a.recorded_at <= $2
                              AND (a.withdrawn_at IS NULL OR a.withdrawn_at > $2)
                              AND f.recorded_at <= $2
                              AND (f.superseded_at IS NULL OR f.superseded_at > $2) END
                     AND ($3::timestamptz IS NULL OR (
                          (f.valid_from IS NULL OR f.valid_from <= $3)
                          AND (f.valid_to IS NULL OR f.valid_to > $3)))""",
                pk,
                known_as_of,
                as_of,
            )
        history = tuple(
            SourceVersionView(
                version=v["version"],
                source_type=v["source_type"],
                title=v["title"],
                uri=v["uri"],
                observed_at=v["observed_at"],
                recorded_at=v["recorded_at"],
            )
            for v in versions
        )
        latest = history[0]
        return SourceDetail(
            scope_id=scope,
            source=domain.SourceView(
                source_id, latest.source_type, latest.title, latest.uri, latest.observed_at
            ),
            versions=history,
            freshness=freshness(latest.observed_at, datetime.now(UTC), stale_after_days),
            cited_by_facts=cited,
        )
