"""The asyncpg adapter of the knowledge graph's reads: a fact's history, entities, graph
traversal and conflicts.

It shares the pool and the fact-reading queries of ``KnowledgeStore``; every read is
filtered by the caller's scope ids.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from vera.errors import InvalidInput

from .domain import ConflictGroupView, Edge, FactState, FactVersionView, FactView, Total, normalize
from .graph import (
    ConflictFilter,
    EntityView,
    Neighborhood,
    rank_facts,
    resolve_entity,
)
from .store import KnowledgeStore, Params, bounded_count


def conflict_group_id(scope_id: uuid.UUID, subject: str, predicate: str) -> str:
    """Stable, short id of a conflict group: the keyset of the conflicts cursor."""
    material = "\x1f".join((str(scope_id), normalize(subject), normalize(predicate)))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


# ``conflict_group_id`` of a facts row, in SQL, so conflict groups page in the database.
_GROUP_ID = """left(encode(sha256(convert_to(
    f.scope_id::text || chr(31) || f.subject_norm || chr(31) || f.predicate_norm, 'UTF8')),
    'hex'), 32)"""


class GraphStore:
    """Fact history, entities, neighbourhoods and conflict groups."""

    def __init__(self, store: KnowledgeStore, *, max_counted_rows: int = 1000) -> None:
        self._store = store
        # Totals count up to this many rows (KnowledgeSettings.max_counted_rows).
        self._count_limit = max_counted_rows
        self._pool = store.pool
        self._ontology = store.ontology

    @property
    def ontology_version(self) -> str:
        return self._ontology.version

    # --- facts --------------------------------------------------------------------------

    async def get_fact(
        self,
        scope_ids: Sequence[uuid.UUID],
        fact_key: str,
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> tuple[FactView | None, list[FactVersionView]]:
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            rows = await conn.fetch(
                """SELECT version_id, state, valid_from, valid_to, recorded_at, superseded_at,
                          superseded_by, corrects, correction_reason
                   FROM facts
                   WHERE fact_key = $1 AND scope_id = ANY($2::uuid[])
                     AND recorded_at <= coalesce($3::timestamptz, now())
                   ORDER BY recorded_at, version_id""",
                fact_key,
                list(scope_ids),
                known_as_of,
            )
            if not rows:
                raise InvalidInput("fact_key", "no such fact in scope", reason="not_found")
            fact = await self._store.fact_by_key(conn, scope_ids, fact_key, as_of, known_as_of)
        versions = [
            FactVersionView(
                version_id=r["version_id"],
                state=FactState(r["state"]),
                valid_from=r["valid_from"],
                valid_to=r["valid_to"],
                recorded_at=r["recorded_at"],
                # What was known then: a later close had not happened yet.
                superseded_at=(
                    r["superseded_at"]
                    if known_as_of is None
                    or (r["superseded_at"] is not None and r["superseded_at"] <= known_as_of)
                    else None
                ),
                superseded_by=r["superseded_by"],
                corrects=r["corrects"],
                correction_reason=r["correction_reason"],
            )
            for r in rows
        ]
        return fact, versions

    # --- entities -----------------------------------------------------------------------

    async def _entity_matches(
        self,
        conn: asyncpg.Connection,
        scope_ids: Sequence[uuid.UUID],
        name: str,
        entity_id: uuid.UUID | None,
    ) -> list[EntityView]:
        if entity_id is not None:
            rows = await conn.fetch(
                "SELECT * FROM entities WHERE entity_id = $1 AND scope_id = ANY($2::uuid[])",
                entity_id,
                list(scope_ids),
            )
        else:
            key = normalize(name)
            rows = await conn.fetch(
                """SELECT * FROM entities
                   WHERE scope_id = ANY($1::uuid[]) AND (name_key = $2 OR $2 = ANY(alias_keys))
                   ORDER BY name, scope_id, entity_id""",
                list(scope_ids),
                key,
            )
            if not rows:
                # A name facts use that no curator declared is still an entity.
                used = await conn.fetchrow(
                    """SELECT CASE WHEN subject_norm = $2 THEN subject ELSE object END AS name,
                              scope_id,
                              (SELECT count(DISTINCT g.scope_id) FROM facts g
                               WHERE g.scope_id = ANY($1::uuid[]) AND g.superseded_at IS NULL
                                 AND g.state IN ('ACTIVE', 'PROPOSED')
                                 AND (g.subject_norm = $2 OR g.object_norm = $2)) AS scopes
                       FROM facts
                       WHERE scope_id = ANY($1::uuid[]) AND superseded_at IS NULL
                         AND state IN ('ACTIVE', 'PROPOSED')
                         AND (subject_norm = $2 OR object_norm = $2)
                       ORDER BY recorded_at LIMIT 1""",
                    list(scope_ids),
                    key,
                )
                if used is None:
                    return []
                return [
                    EntityView(
                        entity_id=None,
                        scope_id=used["scope_id"] if used["scopes"] == 1 else None,
                        name=used["name"],
                        aliases=(),
                        kind="",
                    )
                ]
        return [
            EntityView(
                entity_id=r["entity_id"],
                scope_id=r["scope_id"],
                name=r["name"],
                aliases=tuple(r["aliases"]),
                kind=r["kind"],
                alias_keys=tuple(r["alias_keys"]),
            )
            for r in rows
        ]

    async def resolve(
        self,
        conn: asyncpg.Connection,
        scope_ids: Sequence[uuid.UUID],
        name: str,
        entity_id: uuid.UUID | None,
    ) -> EntityView:
        field = "entity_id" if entity_id is not None else "entity"
        return resolve_entity(field, await self._entity_matches(conn, scope_ids, name, entity_id))

    async def get_entity(
        self,
        scope_ids: Sequence[uuid.UUID],
        name: str,
        entity_id: uuid.UUID | None,
        as_of: datetime | None,
        known_as_of: datetime | None,
        limit: int,
        conflicts: ConflictFilter,
    ) -> tuple[EntityView, list[FactView], Total]:
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            entity = await self.resolve(conn, scope_ids, name, entity_id)
            facts, total = await self._store.ranked_facts(
                conn,
                limit=limit,
                conflict_filter=conflicts,
                count_at_most=self._count_limit,
                scope_ids=[entity.scope_id] if entity.scope_id else scope_ids,
                node_keys=entity.node_keys,
                as_of=as_of,
                known_as_of=known_as_of,
            )
        return entity, facts, total

    async def _canonical(
        self, conn: asyncpg.Connection, scope_ids: Sequence[uuid.UUID], keys: Sequence[str]
    ) -> dict[str, tuple[str, ...]]:
        """Each normalized name -> every name of the entity it denotes (itself if none)."""
        rows = await conn.fetch(
            """SELECT name_key, alias_keys FROM entities
               WHERE scope_id = ANY($1::uuid[])
                 AND (name_key = ANY($2::text[]) OR alias_keys && $2::text[])""",
            list(scope_ids),
            list(keys),
        )
        out: dict[str, tuple[str, ...]] = {k: (k,) for k in keys}
        for r in rows:
            names = tuple(dict.fromkeys((r["name_key"], *r["alias_keys"])))
            for n in names:
                if n in out:
                    out[n] = tuple(dict.fromkeys((*out[n], *names)))
        return out

    # --- graph --------------------------------------------------------------------------

    async def explore(
        self,
        scope_ids: Sequence[uuid.UUID],
        name: str,
        entity_id: uuid.UUID | None,
        depth: int,
        limit: int,
        as_of: datetime | None,
        known_as_of: datetime | None,
        conflicts: ConflictFilter,
    ) -> Neighborhood:
        edges: list[Edge] = []
        truncated = False
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            entity = await self.resolve(conn, scope_ids, name, entity_id)
            scopes = [entity.scope_id] if entity.scope_id else list(scope_ids)
            start = normalize(entity.name)
            # node key -> the node (first name) it belongs to
            node_of = {k: start for k in entity.node_keys}
            display = {start: entity.name}
            frontier = list(entity.node_keys)
            seen_facts: set[str] = set()
            for hop in range(1, depth + 1):
                if not frontier or truncated:
                    break
                # Only the edges still fitting the page (plus one, to know it was cut) are
                # read, so a hop's frontier is bounded by the page size too.
                room = limit - len(edges)
                facts, _ = await self._store.ranked_facts(
                    conn,
                    limit=room + 1,
                    conflict_filter=conflicts,
                    scope_ids=scopes,
                    node_keys=frontier,
                    exclude_keys=sorted(seen_facts),
                    as_of=as_of,
                    known_as_of=known_as_of,
                )
                if len(facts) > room:
                    truncated = True
                    facts = facts[:room]
                current = set(frontier)
                reached: list[str] = []
                for f in facts:
                    s_key, o_key = normalize(f.subject), normalize(f.object)
                    here, there, there_text = (
                        (s_key, o_key, f.object) if s_key in current else (o_key, s_key, f.subject)
                    )
                    seen_facts.add(f.fact_key)
                    if there not in node_of:
                        node_of[there] = there
                        display[there] = there_text
                        reached.append(there)
                    edges.append(Edge(f, hop, display[node_of[here]], display[node_of[there]]))
                aliases = await self._canonical(conn, scopes, reached)
                frontier = []
                for key in reached:
                    for alias in aliases.get(key, (key,)):
                        node_of.setdefault(alias, node_of[key])
                        frontier.append(alias)
        nodes = tuple(dict.fromkeys(display[n] for n in node_of.values()))
        return Neighborhood(entity, tuple(edges), nodes, truncated)

    # --- conflicts ----------------------------------------------------------------------

    async def list_conflicts(
        self,
        scope_ids: Sequence[uuid.UUID],
        page_size: int,
        after: str,
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> tuple[list[ConflictGroupView], Total, str]:
        """A page of conflict groups in the stable order of their group id (a hash of scope,
        subject and predicate), after the group ``after`` (a keyset cursor: groups appearing
        or resolving between pages never shift the rest). Returns the page, the total and
        the last group id of the page when more follow, else ""."""
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            p = Params()
            conflicted = self._store.fact_select(
                p,
                scope_ids=scope_ids,
                as_of=as_of,
                known_as_of=known_as_of,
                live_only=True,
                predicate_norms=sorted(self._ontology.single_valued_predicates),
                extra_columns=f", {_GROUP_ID} AS group_id",
            )
            groups_sql = f"""SELECT group_id, array_agg(fact_key ORDER BY fact_key) AS keys
                FROM ({conflicted}) f WHERE cardinality(f.conflicting_fact_keys) > 0
                GROUP BY group_id"""
            total = await bounded_count(
                conn, f"SELECT 1 FROM ({groups_sql}) g", p.values, self._count_limit
            )
            after_id, size = p(after), p(page_size + 1)
            rows = await conn.fetch(
                f"""SELECT group_id, keys FROM ({groups_sql}) g WHERE group_id > {after_id}
                    ORDER BY group_id LIMIT {size}""",
                *p.values,
            )
            page = [r["group_id"] for r in rows[:page_size]]
            cursor = page[-1] if len(rows) > page_size else ""
            groups = {r["group_id"]: r["keys"] for r in rows[:page_size]}
            keys = [k for g in page for k in groups[g]]
            views = (
                await self._store.facts(
                    conn,
                    scope_ids=scope_ids,
                    fact_keys=keys,
                    as_of=as_of,
                    known_as_of=known_as_of,
                    live_only=True,
                )
                if keys
                else []
            )
        by_key = {v.fact_key: v for v in views}
        out = []
        for g in page:
            facts = rank_facts(by_key[k] for k in groups[g] if k in by_key)
            if facts:
                out.append(
                    ConflictGroupView(
                        scope_id=facts[0].scope_id,
                        subject=facts[0].subject,
                        predicate=facts[0].predicate,
                        facts=tuple(facts),
                    )
                )
        return out, total, cursor
