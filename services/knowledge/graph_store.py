"""The asyncpg adapter of the knowledge graph: corrections, fact history, entities,
sources, graph traversal, conflicts, the scoped change feed and communities.

It shares the pool and the fact-reading queries of ``KnowledgeStore``; every read is
filtered by the caller's scope ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from vera.errors import InvalidInput

from . import domain
from .domain import ChangeKind, FactIn, FactState, FactView, Total, normalize
from .graph import (
    LOUVAIN,
    LOUVAIN_SEED,
    ConflictFilter,
    EntityView,
    Freshness,
    GraphFact,
    SourceVersionView,
    Summarizer,
    cluster,
    freshness,
    rank_facts,
    resolve_entity,
)
from .outbox import (
    Outbox,
    close_version,
    curated_columns,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
)
from .store import KnowledgeStore, Params, bounded_count

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class FactVersionView:
    version_id: uuid.UUID
    state: FactState
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    superseded_by: str
    corrects: str
    correction_reason: str


@dataclass(frozen=True)
class SourceDetail:
    scope_id: uuid.UUID
    source: domain.SourceView
    versions: tuple[SourceVersionView, ...]
    freshness: Freshness
    cited_by_facts: int


@dataclass(frozen=True)
class Edge:
    fact: FactView
    hop: int
    from_node: str
    to_node: str


@dataclass(frozen=True)
class Neighborhood:
    entity: EntityView
    edges: tuple[Edge, ...]
    nodes: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True)
class ConflictGroupView:
    scope_id: uuid.UUID
    subject: str
    predicate: str
    facts: tuple[FactView, ...]


@dataclass(frozen=True)
class ScopeChangeView:
    position: int
    change: str
    scope_id: uuid.UUID
    fact: FactView | None
    source_id: str
    created_at: datetime
    actor_id: uuid.UUID | None = None  # whose action wrote it; None before actors were kept


@dataclass(frozen=True)
class RunView:
    run_id: uuid.UUID
    scope_id: uuid.UUID
    change_position: int
    algorithm: str
    seed: int
    summarizer: str
    fact_count: int
    entity_count: int
    created_at: datetime


@dataclass(frozen=True)
class CommunityView:
    community_id: uuid.UUID
    scope_id: uuid.UUID
    label: str
    summary: str
    entities: tuple[str, ...]
    run: RunView
    fact_count: int
    score: float = 0.0


def conflict_group_id(scope_id: uuid.UUID, subject: str, predicate: str) -> str:
    """Stable, short id of a conflict group: the keyset of the conflicts cursor."""
    material = "\x1f".join((str(scope_id), normalize(subject), normalize(predicate)))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


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

# ``conflict_group_id`` of a facts row, in SQL, so conflict groups page in the database.
_GROUP_ID = """left(encode(sha256(convert_to(
    f.scope_id::text || chr(31) || f.subject_norm || chr(31) || f.predicate_norm, 'UTF8')),
    'hex'), 32)"""


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


class GraphStore:
    def __init__(
        self, store: KnowledgeStore, summarizer: Summarizer, *, max_counted_rows: int = 1000
    ) -> None:
        self._store = store
        # Totals count up to this many rows (KnowledgeSettings.max_counted_rows).
        self._count_limit = max_counted_rows
        self._pool = store.pool
        self._ontology = store.ontology
        self._summarizer = summarizer

    @property
    def ontology_version(self) -> str:
        return self._ontology.version

    # --- corrections --------------------------------------------------------------------

    async def correct_fact(
        self,
        principal_id: uuid.UUID,
        scope_id: uuid.UUID,
        fact_key: str,
        replacement: FactIn,
        reason: str,
    ) -> tuple[FactView, FactView, int, bool]:
        outbox = Outbox(actor_id=principal_id)
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [fact_key, replacement.fact_key])
            old = await conn.fetchrow(
                "SELECT * FROM facts WHERE fact_key = $1 AND superseded_at IS NULL", fact_key
            )
            if old is None or old["scope_id"] != scope_id:
                raise InvalidInput("fact_key", "no such fact in scope", reason="not_found")
            same_key = replacement.fact_key == fact_key
            repeat = await self._repeat_of(conn, old, replacement, same_key)
            if repeat is not None:
                return repeat
            if old["state"] != FactState.ACTIVE.value:
                raise InvalidInput(
                    "fact_key", "only active facts are corrected", reason="not_active"
                )
            if same_key and (replacement.valid_from, replacement.valid_to) == (
                old["valid_from"],
                old["valid_to"],
            ):
                raise InvalidInput("replacement", "changes nothing", reason="no_change")
            source_pk = None
            if replacement.source_id:
                source_pk = await conn.fetchval(
                    "SELECT source_pk FROM sources WHERE scope_id = $1 AND source_id = $2",
                    scope_id,
                    replacement.source_id,
                )
                if source_pk is None:
                    raise InvalidInput(
                        "replacement.source_id", "unknown source", reason="not_found"
                    )
            await close_version(conn, old["version_id"])
            closed_version = old["version_id"]
            if not same_key:
                # The world changed at the replacement's valid_from: the old fact stays true
                # before it. Otherwise the old fact was wrong all along: SUPERSEDED.
                cut = replacement.valid_from is not None and (
                    old["valid_from"] is None or old["valid_from"] < replacement.valid_from
                )
                state = FactState.ACTIVE.value if cut else FactState.SUPERSEDED.value
                valid_to = old["valid_to"]
                if cut:
                    assert replacement.valid_from is not None
                    if valid_to is None or valid_to > replacement.valid_from:
                        valid_to = replacement.valid_from
                closed_version = await insert_version(
                    conn,
                    copy_of=old["version_id"],
                    state=state,
                    valid_to=valid_to,
                    superseded_by=replacement.fact_key,
                    correction_reason=reason,
                )
                outbox.add(ChangeKind.FACT_UPSERTED, scope_id, version_id=closed_version)
                await conn.execute(
                    """UPDATE facts SET superseded_at = now()
                       WHERE fact_key = $1 AND superseded_at IS NULL""",
                    replacement.fact_key,
                )
            source_type = ""
            if source_pk is not None:
                source_type = (
                    await conn.fetchval(
                        "SELECT source_type FROM sources WHERE source_pk = $1", source_pk
                    )
                    or ""
                )
            f = replacement
            new_version = await insert_version(
                conn,
                **curated_columns(f, scope_id),
                source_type=source_type or old["source_type"] if same_key else source_type,
                created_by=principal_id,
                corrects=fact_key,
                correction_reason=reason,
            )
            outbox.add(ChangeKind.FACT_UPSERTED, scope_id, version_id=new_version)
            exists = await conn.fetchval(
                """SELECT 1 FROM assertions WHERE fact_key = $1 AND status = 'verified'
                     AND source_pk IS NOT DISTINCT FROM $2""",
                f.fact_key,
                source_pk,
            )
            if not exists:
                assertion_id = await insert_assertion(
                    conn,
                    fact_key=f.fact_key,
                    scope_id=scope_id,
                    source_pk=source_pk,
                    trust_tier=f.trust_tier,
                    authority=f.authority,
                    status="verified",
                    asserted_by=principal_id,
                )
                if f.evidence or f.locator:
                    await insert_evidence(conn, assertion_id, [(f.evidence, f.locator)])
            await outbox.flush(conn)
            views = {
                v.version_id: v
                for v in await self._store.facts(
                    conn, version_ids=[closed_version, new_version], live_only=False
                )
            }
            position = await conn.fetchval("SELECT coalesce(max(position), 0) FROM outbox")
        return views[closed_version], views[new_version], position, True

    async def _repeat_of(
        self,
        conn: asyncpg.Connection,
        old: asyncpg.Record,
        replacement: FactIn,
        same_key: bool,
    ) -> tuple[FactView, FactView, int, bool] | None:
        """The stored outcome when this exact correction was already recorded, else None,
        so re-running a curator's correction file changes nothing."""
        if same_key:
            if old["corrects"] != old["fact_key"] or (
                replacement.valid_from,
                replacement.valid_to,
            ) != (old["valid_from"], old["valid_to"]):
                return None
            closed_id = await conn.fetchval(
                """SELECT version_id FROM facts WHERE fact_key = $1 AND superseded_at IS NOT NULL
                   ORDER BY superseded_at DESC LIMIT 1""",
                old["fact_key"],
            )
            new_id = old["version_id"]
        else:
            if old["superseded_by"] != replacement.fact_key:
                return None
            new_id = await conn.fetchval(
                "SELECT version_id FROM facts WHERE fact_key = $1 AND superseded_at IS NULL",
                replacement.fact_key,
            )
            closed_id = old["version_id"]
        if new_id is None or closed_id is None:
            return None
        views = {
            v.version_id: v
            for v in await self._store.facts(
                conn, version_ids=[closed_id, new_id], live_only=False
            )
        }
        position = await conn.fetchval("SELECT coalesce(max(position), 0) FROM outbox")
        return views[closed_id], views[new_id], position, False

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
