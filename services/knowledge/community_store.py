"""The asyncpg adapter of communities: derivation runs over a scope's graph, their
non-authoritative summaries, search and lineage.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from vera.errors import InvalidInput

from .domain import CommunityView, FactView, RunView, Total
from .graph import (
    LOUVAIN,
    LOUVAIN_SEED,
    GraphFact,
    Summarizer,
    cluster,
)
from .outbox import (
    lock_keys,
)
from .store import KnowledgeStore, bounded_count

_WORD = re.compile(r"\w+", re.UNICODE)


def _run(r: asyncpg.Record) -> RunView:
    return RunView(
        run_id=r["run_id"],
        scope_id=r["scope_id"],
        change_position=r["change_position"],
        algorithm=r["algorithm"],
        seed=r["seed"],
        summarizer=r["summarizer"],
        fact_count=r["fact_count"],
        entity_count=r["entity_count"],
        created_at=r["run_created_at"],
    )


def _community(r: asyncpg.Record) -> CommunityView:
    return CommunityView(
        community_id=r["community_id"],
        scope_id=r["scope_id"],
        label=r["label"],
        summary=r["summary"],
        entities=tuple(r["entities"]),
        run=_run(r),
        fact_count=r["fact_count_lineage"],
        score=float(r.get("score") or 0.0),
    )


_COMMUNITY_SELECT = """
    SELECT c.community_id, c.scope_id, c.label, c.summary, c.entities,
           r.run_id, r.change_position, r.algorithm, r.seed, r.summarizer, r.fact_count,
           r.entity_count, r.created_at AS run_created_at,
           (SELECT count(*) FROM community_facts cf WHERE cf.community_id = c.community_id)
               AS fact_count_lineage
"""


class CommunityStore:
    """Communities of a scope; shares the fact reads' pool."""

    def __init__(
        self, store: KnowledgeStore, summarizer: Summarizer, *, max_counted_rows: int = 1000
    ) -> None:
        self._store = store
        # Totals count up to this many rows (KnowledgeSettings.max_counted_rows).
        self._count_limit = max_counted_rows
        self._pool = store.pool
        self._ontology = store.ontology
        self._summarizer = summarizer

    # --- communities --------------------------------------------------------------------

    async def derive_communities(self, scope_id: uuid.UUID) -> tuple[RunView, bool, int]:
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [f"communities:{scope_id}"])
            position = await conn.fetchval(
                "SELECT coalesce(max(position), 0) FROM outbox WHERE scope_id = $1", scope_id
            )
            existing = await conn.fetchrow(
                """SELECT *, created_at AS run_created_at FROM community_runs
                   WHERE scope_id = $1 AND change_position = $2 AND algorithm = $3
                     AND summarizer = $4""",
                scope_id,
                position,
                LOUVAIN,
                self._summarizer.name,
            )
            if existing is not None:
                count = await conn.fetchval(
                    "SELECT count(*) FROM communities WHERE run_id = $1", existing["run_id"]
                )
                return _run(existing), False, count
            rows = await conn.fetch(
                """SELECT fact_key, version_id, subject, predicate, object, subject_norm,
                          object_norm, trust_tier, authority FROM facts
                   WHERE scope_id = $1 AND superseded_at IS NULL AND state = 'ACTIVE'
                     AND (valid_from IS NULL OR valid_from <= now())
                     AND (valid_to IS NULL OR valid_to > now())""",
                scope_id,
            )
            facts = [GraphFact(**dict(r)) for r in rows]
            entity_rows = await conn.fetch(
                "SELECT name_key, alias_keys FROM entities WHERE scope_id = $1", scope_id
            )
            canonical: dict[str, str] = {}
            for r in entity_rows:
                canonical[r["name_key"]] = r["name_key"]
                for a in r["alias_keys"]:
                    canonical.setdefault(a, r["name_key"])
            # Louvain over a large scope takes seconds: never on the event loop.
            drafts = await asyncio.to_thread(cluster, facts, canonical, seed=LOUVAIN_SEED)
            nodes = {canonical.get(f.subject_norm, f.subject_norm) for f in facts} | {
                canonical.get(f.object_norm, f.object_norm) for f in facts
            }
            run_id = uuid.uuid4()
            run_row = await conn.fetchrow(
                """INSERT INTO community_runs (run_id, scope_id, change_position, algorithm,
                       seed, summarizer, fact_count, entity_count)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                   RETURNING *, created_at AS run_created_at""",
                run_id,
                scope_id,
                position,
                LOUVAIN,
                LOUVAIN_SEED,
                self._summarizer.name,
                len(facts),
                len(nodes),
            )
            communities, members = [], []
            for ordinal, draft in enumerate(drafts):
                label, summary = self._summarizer.summarize(draft)
                community_id = uuid.uuid4()
                communities.append(
                    (community_id, run_id, scope_id, ordinal, label, summary, list(draft.entities))
                )
                members += [(community_id, f.fact_key, f.version_id) for f in draft.facts]
            # Two batched statements: a large scope has tens of thousands of communities.
            await conn.executemany(
                """INSERT INTO communities (community_id, run_id, scope_id, ordinal, label,
                       summary, entities, search)
                   VALUES ($1, $2, $3, $4, $5, $6, $7::text[],
                           to_tsvector('simple', $5 || ' ' || $6 || ' '
                                       || array_to_string($7::text[], ' ')))""",
                communities,
            )
            await conn.executemany(
                "INSERT INTO community_facts (community_id, fact_key, version_id)"
                " VALUES ($1, $2, $3)",
                members,
            )
        return _run(run_row), True, len(drafts)

    async def scopes_needing_communities(self) -> list[uuid.UUID]:
        """Scopes with curated facts whose change log moved past their latest run."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                """SELECT o.scope_id FROM outbox o
                   WHERE o.kind = 'fact_upserted'
                     AND EXISTS (SELECT 1 FROM facts f WHERE f.scope_id = o.scope_id
                                 AND f.origin = 'curated')
                   GROUP BY o.scope_id
                   HAVING max(o.position) > coalesce(
                       (SELECT max(change_position) FROM community_runs r
                        WHERE r.scope_id = o.scope_id), 0)""",
            )
        return [r["scope_id"] for r in rows]

    async def search_communities(
        self,
        scope_ids: Sequence[uuid.UUID],
        query: str,
        limit: int,
        known_as_of: datetime | None,
        as_of: datetime | None = None,
    ) -> tuple[list[CommunityView], str]:
        """Communities of each scope's latest derivation run recorded by ``known_as_of``
        (or now); with ``as_of``, only those with a lineage fact valid at that instant."""
        words = list(dict.fromkeys(w.casefold() for w in _WORD.findall(query)))[:64]
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            runs = await conn.fetch(
                """SELECT DISTINCT ON (scope_id) run_id FROM community_runs
                   WHERE scope_id = ANY($1::uuid[])
                     AND created_at <= coalesce($2::timestamptz, now())
                   ORDER BY scope_id, created_at DESC, change_position DESC""",
                list(scope_ids),
                known_as_of,
            )
            if not runs:
                return [], "no_communities_derived"
            if not words:
                return [], "no_matching_communities"
            tsquery = " | ".join(words)
            rows = await conn.fetch(
                f"""{_COMMUNITY_SELECT},
                       ts_rank(c.search, to_tsquery('simple', $2)) AS score
                    FROM communities c JOIN community_runs r ON r.run_id = c.run_id
                    WHERE c.run_id = ANY($1::uuid[])
                      AND c.search @@ to_tsquery('simple', $2)
                      AND ($4::timestamptz IS NULL OR EXISTS (
                          SELECT 1 FROM community_facts cf
                          JOIN facts v ON v.version_id = cf.version_id
                          WHERE cf.community_id = c.community_id
                            AND (v.valid_from IS NULL OR v.valid_from <= $4)
                            AND (v.valid_to IS NULL OR v.valid_to > $4)))
                    ORDER BY score DESC, c.ordinal, c.community_id LIMIT $3""",
                [r["run_id"] for r in runs],
                tsquery,
                limit,
                as_of,
            )
        if not rows:
            return [], "no_matching_communities"
        return [_community(r) for r in rows], ""

    async def community_lineage(
        self,
        scope_ids: Sequence[uuid.UUID],
        community_id: uuid.UUID,
        page_size: int,
        offset: int,
        as_of: datetime | None = None,
        known_as_of: datetime | None = None,
    ) -> tuple[CommunityView, list[FactView], Total, bool]:
        """A page of the fact versions the community was derived from, its total and
        whether more follow. ``known_as_of``: the community's run must be recorded by then
        (else not_found, as for an unknown id) and citations read as known then.
        ``as_of``: only lineage versions valid at that instant; the total counts the
        filtered lineage."""
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            row = await conn.fetchrow(
                f"""{_COMMUNITY_SELECT}
                    FROM communities c JOIN community_runs r ON r.run_id = c.run_id
                    WHERE c.community_id = $1 AND c.scope_id = ANY($2::uuid[])
                      AND r.created_at <= coalesce($3::timestamptz, now())""",
                community_id,
                list(scope_ids),
                known_as_of,
            )
            if row is None:
                raise InvalidInput("community_id", "no such community", reason="not_found")
            valid = """($2::timestamptz IS NULL OR EXISTS (
                           SELECT 1 FROM facts v WHERE v.version_id = cf.version_id
                             AND (v.valid_from IS NULL OR v.valid_from <= $2)
                             AND (v.valid_to IS NULL OR v.valid_to > $2)))"""
            lineage = await conn.fetch(
                f"""SELECT cf.version_id FROM community_facts cf
                    WHERE cf.community_id = $1 AND {valid}
                    ORDER BY cf.fact_key OFFSET $3 LIMIT $4""",
                community_id,
                as_of,
                offset,
                page_size + 1,  # one more: whether a next page exists, total or not
            )
            more = len(lineage) > page_size
            lineage = lineage[:page_size]
            total = await bounded_count(
                conn,
                f"SELECT 1 FROM community_facts cf WHERE cf.community_id = $1 AND {valid}",
                (community_id, as_of),
                self._count_limit,
            )
            versions = [r["version_id"] for r in lineage]
            facts = (
                await self._store.facts(
                    conn, version_ids=versions, known_as_of=known_as_of, live_only=False
                )
                if versions
                else []
            )
        order = {v: i for i, v in enumerate(versions)}
        facts.sort(key=lambda f: order[f.version_id])
        return _community(row), facts, total, more
