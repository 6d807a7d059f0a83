"""The asyncpg adapter of facts: the fact reads every part shares, ingest, proposals
and feedback.

Writes run in one transaction each through the write kernel (``outbox``); reads are one
or two queries per call.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from vera import page_tokens
from vera.errors import InvalidInput

from . import domain
from .domain import (
    AssertionView,
    ChangeKind,
    ChangesPage,
    ChangeView,
    Counts,
    EvidenceView,
    FactState,
    FactView,
    FeedbackIn,
    FeedbackView,
    IngestBatch,
    IngestResult,
    Ontology,
    Outcome,
    Proposal,
    ProposalDecision,
    ProposalFindings,
    ProposalReport,
    ProposalResult,
    RankingFeedbackRow,
    RetractionStatus,
    SourceView,
    TaskContext,
    Total,
)
from .graph import ConflictFilter, alias_keys
from .outbox import (
    Outbox,
    change_position,
    close_version,
    curated_columns,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
    record_proposal_targets,
)

_FACT_COLUMNS = """
    f.version_id, f.fact_key, f.scope_id, f.subject, f.predicate, f.object, f.state,
    f.trust_tier, f.authority, f.valid_from, f.valid_to, f.recorded_at, f.superseded_at,
    f.repository, f.branch, f.code_path, f.document_type, f.source_type,
    f.superseded_by, f.corrects
"""

_LIVE = "('ACTIVE', 'PROPOSED')"
# A capped feedback page counts this many times its size of older rows first, widening
# by _WIDEN while the cap leaves the page short.
_FIRST_SPAN = 2
_WIDEN = 4


async def bounded_count(
    conn: asyncpg.Connection, query: str, values: Sequence[Any], limit: int
) -> Total:
    """Counts the rows of ``query`` (placeholders ``values``), reading at most ``limit``
    + 1 of them."""
    found = await conn.fetchval(
        f"SELECT count(*) FROM ({query} LIMIT {int(limit) + 1}) counted", *values
    )
    return Total(limit, True) if found > limit else Total(found, False)


class Params:
    """Collects positional parameters so SQL text only ever holds $n placeholders."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def _tx_time(alias: str, known_as_of: str | None) -> str:
    """The version is current at transaction time (``known_as_of`` placeholder or now)."""
    if known_as_of is None:
        return f"{alias}.superseded_at IS NULL"
    return (
        f"{alias}.recorded_at <= {known_as_of}"
        f" AND ({alias}.superseded_at IS NULL OR {alias}.superseded_at > {known_as_of})"
    )


def _valid_time(alias: str, as_of: str) -> str:
    return (
        f"({alias}.valid_from IS NULL OR {alias}.valid_from <= {as_of})"
        f" AND ({alias}.valid_to IS NULL OR {alias}.valid_to > {as_of})"
    )


def _conflicts(single_valued: str, known_as_of: str | None, as_of: str | None = None) -> str:
    """Keys of live facts in the same scope contradicting ``f`` on a single-valued predicate.

    Without ``as_of`` any overlap of the valid intervals disagrees; with it, only a fact
    also valid at that instant (what was true then had one value or a conflict)."""
    at_valid = f"AND {_valid_time('c', as_of)}" if as_of is not None else ""
    return f"""
        CASE WHEN f.state IN {_LIVE} AND f.predicate_norm = ANY({single_valued}::text[])
        THEN ARRAY(
            SELECT DISTINCT c.fact_key FROM facts c
            WHERE c.scope_id = f.scope_id
              AND c.subject_norm = f.subject_norm
              AND c.predicate_norm = f.predicate_norm
              AND c.object_norm <> f.object_norm
              AND c.state IN {_LIVE}
              AND {_tx_time("c", known_as_of)}
              AND (c.valid_from IS NULL OR f.valid_to IS NULL OR c.valid_from < f.valid_to)
              AND (f.valid_from IS NULL OR c.valid_to IS NULL OR f.valid_from < c.valid_to)
              {at_valid}
            ORDER BY c.fact_key)
        ELSE ARRAY[]::text[] END AS conflicting_fact_keys
    """


def _rank_tier(known_as_of: str | None) -> str:
    """A version's displayed trust tier in SQL: the best tier among the assertions that
    cite it as known at ``known_as_of`` (or now), else its own (``KnowledgeStore._view``)."""
    if known_as_of is None:
        visible = "a.status <> 'withdrawn'"
    else:
        visible = (
            f"a.recorded_at <= {known_as_of}"
            f" AND (a.withdrawn_at IS NULL OR a.withdrawn_at > {known_as_of})"
        )
    return f"""coalesce((SELECT min(a.trust_tier) FROM assertions a
        WHERE a.fact_key = f.fact_key AND a.supports AND {visible}), f.trust_tier)"""


_CONFLICT_FILTER_SQL = {
    ConflictFilter.INCLUDE: "true",
    ConflictFilter.EXCLUDE: "cardinality(f.conflicting_fact_keys) = 0",
    ConflictFilter.ONLY: "cardinality(f.conflicting_fact_keys) > 0",
}


class KnowledgeStore:
    def __init__(self, pool: asyncpg.Pool, ontology: Ontology, *, stale_source_days: int) -> None:
        self._pool = pool
        self._ontology = ontology
        self._stale_source_days = stale_source_days
        self._single_valued = sorted(ontology.single_valued_predicates)

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    @property
    def ontology(self) -> Ontology:
        return self._ontology

    # --- reads --------------------------------------------------------------------------

    async def batch_get_facts(
        self,
        scope_ids: Sequence[uuid.UUID],
        fact_keys: Sequence[str],
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> list[FactView]:
        if not scope_ids or not fact_keys:
            return []
        # No transaction: at READ COMMITTED it would give the two reads no common snapshot,
        # only a BEGIN and a COMMIT round trip on every query's re-read.
        async with self._pool.acquire() as conn:
            views = await self.facts(
                conn,
                scope_ids=scope_ids,
                fact_keys=fact_keys,
                as_of=as_of,
                known_as_of=known_as_of,
                live_only=True,
            )
        by_key = {v.fact_key: v for v in views}
        ordered: list[FactView] = []
        for key in dict.fromkeys(fact_keys):
            if key in by_key:
                ordered.append(by_key[key])
        return ordered

    async def explain_fact(
        self,
        scope_ids: Sequence[uuid.UUID],
        fact_key: str,
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> tuple[FactView, list[AssertionView]] | None:
        if not scope_ids:
            return None
        async with self._pool.acquire() as conn, conn.transaction(readonly=True):
            rows, fallback = await self._key_rows(conn, scope_ids, fact_key, as_of, known_as_of)
            if not rows:
                return None
            assertions = await self._assertions(
                conn, [fact_key], known_as_of, include_withdrawn=True
            )
        all_assertions = assertions.get(fact_key, [])
        view = self._view(rows[0], [a for a in all_assertions if _cites(a)])
        if fallback:
            replaced = domain.answer_after_replacement(view)
            if replaced is None:
                return None
            view = replaced
        return view, domain.best_first(all_assertions)

    async def fact_by_key(
        self,
        conn: asyncpg.Connection,
        scope_ids: Sequence[uuid.UUID],
        fact_key: str,
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> FactView | None:
        """The version a read by key answers (``_key_rows``), with its citations."""
        rows, fallback = await self._key_rows(conn, scope_ids, fact_key, as_of, known_as_of)
        views = await self._views(conn, rows, known_as_of)
        if not views:
            return None
        return domain.answer_after_replacement(views[0]) if fallback else views[0]

    async def _key_rows(
        self,
        conn: asyncpg.Connection,
        scope_ids: Sequence[uuid.UUID],
        fact_key: str,
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> tuple[list[asyncpg.Record], bool]:
        """The version of ``fact_key`` valid at ``as_of`` (or now); without ``as_of`` and
        with none valid now, its last version (True: the caller answers it only as
        ``domain.answer_after_replacement`` says)."""
        rows = await self._fact_rows(
            conn,
            scope_ids=scope_ids,
            fact_keys=[fact_key],
            as_of=as_of,
            known_as_of=known_as_of,
            live_only=False,
        )
        if rows or as_of is not None:
            return rows, False
        last = await self._fact_rows(
            conn,
            scope_ids=scope_ids,
            fact_keys=[fact_key],
            known_as_of=known_as_of,
            live_only=False,
            valid_filter=False,
        )
        return last, True

    async def list_changes(
        self, after_position: int, page_size: int, scope_ids: Sequence[uuid.UUID] = ()
    ) -> ChangesPage:
        """Changes after ``after_position``; only those of ``scope_ids`` when given."""
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            rows = await conn.fetch(
                """SELECT position, kind, version_id, ref, created_at FROM outbox
                   WHERE position > $1 AND (cardinality($3::uuid[]) = 0 OR scope_id = ANY($3))
                   ORDER BY position LIMIT $2""",
                after_position,
                page_size,
                list(scope_ids),
            )
            version_ids = [r["version_id"] for r in rows if r["version_id"] is not None]
            facts = (
                {
                    v.version_id: v
                    for v in await self.facts(conn, version_ids=version_ids, live_only=False)
                }
                if version_ids
                else {}
            )
            head = await conn.fetchval("SELECT coalesce(max(position), 0) FROM outbox")
        changes = tuple(
            ChangeView(
                position=r["position"],
                kind=ChangeKind(r["kind"]),
                fact=facts.get(r["version_id"]) if r["version_id"] is not None else None,
                created_at=r["created_at"],
                erased_version_id=r["ref"] if r["kind"] == ChangeKind.FACT_ERASED.value else "",
            )
            for r in rows
        )
        return ChangesPage(changes=changes, head_position=head)

    def fact_select(
        self,
        p: Params,
        *,
        scope_ids: Sequence[uuid.UUID] | None = None,
        fact_keys: Sequence[str] | None = None,
        version_ids: Sequence[uuid.UUID] | None = None,
        as_of: datetime | None = None,
        known_as_of: datetime | None = None,
        live_only: bool,
        valid_filter: bool = True,
        node_keys: Sequence[str] | None = None,
        predicate_norms: Sequence[str] | None = None,
        states: Sequence[str] | None = None,
        exclude_keys: Sequence[str] | None = None,
        extra_columns: str = "",
    ) -> str:
        """The SELECT of versions with their conflicts (``conflicting_fact_keys``).

        By key: the version current at ``known_as_of`` (or now) and valid at ``as_of`` (or
        now). By version id: exactly those versions, whatever their times.
        """
        single_valued = p(self._single_valued)
        known = p(known_as_of) if known_as_of is not None else None
        where: list[str] = []
        at_as_of: str | None = None
        if version_ids is not None:
            where.append(f"f.version_id = ANY({p(list(version_ids))}::uuid[])")
        else:
            where.append(_tx_time("f", known))
            if valid_filter:
                at = f"{p(as_of)}::timestamptz" if as_of is not None else "now()"
                at_as_of = at if as_of is not None else None
                where.append(_valid_time("f", at))
        if fact_keys is not None:
            where.append(f"f.fact_key = ANY({p(list(fact_keys))}::text[])")
        if scope_ids is not None:
            where.append(f"f.scope_id = ANY({p(list(scope_ids))}::uuid[])")
        if live_only:
            where.append(f"f.state IN {_LIVE}")
        if node_keys is not None:
            nodes = p(list(node_keys))
            where.append(
                f"(f.subject_norm = ANY({nodes}::text[]) OR f.object_norm = ANY({nodes}::text[]))"
            )
        if predicate_norms is not None:
            where.append(f"f.predicate_norm = ANY({p(list(predicate_norms))}::text[])")
        if states is not None:
            where.append(f"f.state = ANY({p(list(states))}::text[])")
        if exclude_keys:
            where.append(f"NOT (f.fact_key = ANY({p(list(exclude_keys))}::text[]))")
        return (
            f"SELECT {_FACT_COLUMNS}, {_conflicts(single_valued, known, at_as_of)}"
            f"{extra_columns} FROM facts f WHERE {' AND '.join(where)}"
        )

    async def _fact_rows(self, conn: asyncpg.Connection, **filters: Any) -> list[asyncpg.Record]:
        """Versions with their conflicts in one query (filters of ``fact_select``)."""
        p = Params()
        return await conn.fetch(self.fact_select(p, **filters), *p.values)

    async def ranked_facts(
        self,
        conn: asyncpg.Connection,
        *,
        limit: int,
        conflict_filter: ConflictFilter,
        known_as_of: datetime | None = None,
        count_at_most: int | None = None,
        **filters: Any,
    ) -> tuple[list[FactView], Total]:
        """The best-ranked ``limit`` live versions (``graph.rank_facts`` order, computed in
        SQL) that pass the conflict filter, and how many pass it, counting up to
        ``count_at_most`` (None: the page's own length), so a hub entity never loads or
        counts every fact it touches."""
        p = Params()
        known = p(known_as_of) if known_as_of is not None else None
        inner = self.fact_select(
            p,
            known_as_of=known_as_of,
            live_only=True,
            extra_columns=f", {_rank_tier(known)} AS rank_tier",
            **filters,
        )
        kept = _CONFLICT_FILTER_SQL[conflict_filter]
        rows = await conn.fetch(
            f"""SELECT * FROM ({inner}) f WHERE {kept}
                ORDER BY f.rank_tier, f.authority DESC, f.fact_key LIMIT {p(limit)}""",
            *p.values,
        )
        total = Total(len(rows), False)
        if count_at_most is not None:
            q = Params()
            counted = self.fact_select(q, known_as_of=known_as_of, live_only=True, **filters)
            total = await bounded_count(
                conn, f"SELECT 1 FROM ({counted}) f WHERE {kept}", q.values, count_at_most
            )
        return await self._views(conn, rows, known_as_of), total

    async def facts(
        self,
        conn: asyncpg.Connection,
        *,
        known_as_of: datetime | None = None,
        **filters: Any,
    ) -> list[FactView]:
        rows = await self._fact_rows(conn, known_as_of=known_as_of, **filters)
        return await self._views(conn, rows, known_as_of)

    async def _views(
        self, conn: asyncpg.Connection, rows: list[asyncpg.Record], known_as_of: datetime | None
    ) -> list[FactView]:
        if not rows:
            return []
        assertions = await self._assertions(
            conn, [r["fact_key"] for r in rows], known_as_of, include_withdrawn=False
        )
        return [
            self._view(r, [a for a in assertions.get(r["fact_key"], []) if _cites(a)]) for r in rows
        ]

    async def _assertions(
        self,
        conn: asyncpg.Connection,
        fact_keys: Sequence[str],
        known_as_of: datetime | None,
        *,
        include_withdrawn: bool,
    ) -> dict[str, list[AssertionView]]:
        """Assertions (with source and evidence) of the keys, as known at ``known_as_of``."""
        p = Params()
        where = [f"a.fact_key = ANY({p(sorted(set(fact_keys)))}::text[])"]
        if known_as_of is not None:
            t = p(known_as_of)
            where.append(f"a.recorded_at <= {t}")
            where.append(f"(e.evidence_id IS NULL OR e.recorded_at <= {t})")
            if not include_withdrawn:
                where.append(f"(a.withdrawn_at IS NULL OR a.withdrawn_at > {t})")
        elif not include_withdrawn:
            where.append("a.status <> 'withdrawn'")
        rows = await conn.fetch(
            f"""SELECT a.assertion_id, a.fact_key, a.supports, a.trust_tier, a.authority,
                       a.status, a.status_before_withdrawal, a.withdrawn_at, a.recorded_at,
                       s.source_id, s.source_type, s.title, s.uri, s.observed_at,
                       e.evidence_id, e.text, e.locator
                FROM assertions a
                LEFT JOIN sources s ON s.source_pk = a.source_pk
                LEFT JOIN evidence e ON e.assertion_id = a.assertion_id
                WHERE {" AND ".join(where)}
                ORDER BY a.recorded_at, a.assertion_id, e.recorded_at, e.evidence_id""",
            *p.values,
        )
        grouped: dict[uuid.UUID, tuple[str, asyncpg.Record, list[EvidenceView]]] = {}
        for r in rows:
            entry = grouped.setdefault(r["assertion_id"], (r["fact_key"], r, []))
            if r["evidence_id"] is not None:
                entry[2].append(EvidenceView(r["evidence_id"], r["text"], r["locator"]))
        out: dict[str, list[AssertionView]] = {}
        for assertion_id, (key, r, evidence) in grouped.items():
            status = r["status"]
            if (
                status == "withdrawn"
                and known_as_of is not None
                and r["withdrawn_at"] is not None
                and r["withdrawn_at"] > known_as_of
            ):
                # Not withdrawn yet at known_as_of: what it was then (a retracted source's
                # assertions were verified, a withdrawn proposal's pending).
                status = r["status_before_withdrawal"] or "pending"
            source = (
                SourceView(r["source_id"], r["source_type"], r["title"], r["uri"], r["observed_at"])
                if r["source_id"] is not None
                else None
            )
            out.setdefault(key, []).append(
                AssertionView(
                    assertion_id=assertion_id,
                    supports=r["supports"],
                    trust_tier=r["trust_tier"],
                    authority=r["authority"],
                    verification=domain.verification_of(status),
                    source=source,
                    evidence=tuple(evidence),
                    recorded_at=r["recorded_at"],
                )
            )
        return out

    def _view(self, r: asyncpg.Record, cited: list[AssertionView]) -> FactView:
        cited = domain.best_first(cited)
        now = datetime.now(UTC)
        citations = tuple(domain.citation_of(a, now, self._stale_source_days) for a in cited)
        conflicts = tuple(r["conflicting_fact_keys"] or ())
        source_type = r["source_type"] or next(
            (c.source_type for c in citations if c.source_type), ""
        )
        return FactView(
            fact_key=r["fact_key"],
            version_id=r["version_id"],
            scope_id=r["scope_id"],
            subject=r["subject"],
            predicate=r["predicate"],
            object=r["object"],
            state=domain.displayed_state(r["state"], conflicts),
            trust_tier=min([a.trust_tier for a in cited], default=r["trust_tier"]),
            authority=r["authority"],
            valid_from=r["valid_from"],
            valid_to=r["valid_to"],
            recorded_at=r["recorded_at"],
            superseded_at=r["superseded_at"],
            repository=r["repository"],
            branch=r["branch"],
            code_path=r["code_path"],
            document_type=r["document_type"],
            source_type=source_type,
            citations=citations,
            conflicting_fact_keys=conflicts,
            superseded_by=r["superseded_by"],
            corrects=r["corrects"],
        )

    # --- ingest -------------------------------------------------------------------------

    async def ingest(self, batch: IngestBatch) -> IngestResult:
        result = IngestResult()
        outbox = Outbox(actor_id=batch.principal_id)
        scope = batch.scope_id
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                await lock_keys(conn, [f.fact_key for f in batch.facts])
                referenced = sorted(batch.referenced_source_ids())
                known = (
                    {
                        r["source_id"]: r["source_pk"]
                        for r in await conn.fetch(
                            """SELECT source_id, source_pk FROM sources
                           WHERE scope_id = $1 AND source_id = ANY($2::text[])""",
                            scope,
                            referenced,
                        )
                    }
                    if referenced
                    else {}
                )
                domain.check_batch(batch, set(known))
                source_pks = dict(known)
                await self._ingest_sources(conn, batch, source_pks, result.sources, outbox)
                await self._ingest_entities(conn, batch, result.entities)
                await self._ingest_facts(conn, batch, source_pks, result.facts, outbox)
                await outbox.flush(conn)
            result.change_position = await change_position(conn)
        return result

    async def _ingest_sources(
        self,
        conn: asyncpg.Connection,
        batch: IngestBatch,
        source_pks: dict[str, uuid.UUID],
        counts: Counts,
        outbox: Outbox,
    ) -> None:
        seen: set[str] = set()
        for s in batch.sources:
            if s.source_id in seen:
                counts.deduplicated += 1
                continue
            seen.add(s.source_id)
            row = await conn.fetchrow(
                f"""INSERT INTO sources
                       (source_pk, scope_id, source_id, source_type, title, uri, observed_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7)
                   ON CONFLICT (scope_id, source_id) DO UPDATE SET
                       source_type = {_KEPT.format(column="source_type")},
                       title = {_KEPT.format(column="title")},
                       uri = {_KEPT.format(column="uri")},
                       observed_at = coalesce(EXCLUDED.observed_at, sources.observed_at),
                       updated_at = now()
                   WHERE (sources.source_type, sources.title, sources.uri, sources.observed_at)
                       IS DISTINCT FROM ({_KEPT.format(column="source_type")},
                           {_KEPT.format(column="title")}, {_KEPT.format(column="uri")},
                           coalesce(EXCLUDED.observed_at, sources.observed_at))
                   RETURNING source_pk, (xmax = 0) AS inserted""",
                uuid.uuid4(),
                batch.scope_id,
                s.source_id,
                s.source_type,
                s.title,
                s.uri,
                s.observed_at,
            )
            if row is None:  # identical to what is stored: nothing written
                source_pks[s.source_id] = await conn.fetchval(
                    "SELECT source_pk FROM sources WHERE scope_id = $1 AND source_id = $2",
                    batch.scope_id,
                    s.source_id,
                )
                counts.deduplicated += 1
                continue
            source_pks[s.source_id] = row["source_pk"]
            # Every observed change of a source is a new artifact version.
            await conn.execute(
                """INSERT INTO source_versions
                       (source_pk, version, source_type, title, uri, observed_at)
                   SELECT s.source_pk,
                          coalesce((SELECT max(version) FROM source_versions v
                                    WHERE v.source_pk = s.source_pk), 0) + 1,
                          s.source_type, s.title, s.uri, s.observed_at
                   FROM sources s WHERE s.source_pk = $1""",
                row["source_pk"],
            )
            if row["inserted"]:
                counts.created += 1
            else:
                counts.deduplicated += 1
            outbox.add(ChangeKind.SOURCE_UPSERTED, batch.scope_id, ref=s.source_id)

    async def _ingest_entities(
        self, conn: asyncpg.Connection, batch: IngestBatch, counts: Counts
    ) -> None:
        for e in batch.entities:
            row = await conn.fetchrow(
                """INSERT INTO entities (entity_id, scope_id, name, name_key, aliases, kind)
                   VALUES ($1, $2, $3, $4, $5::text[], $6)
                   ON CONFLICT (scope_id, name_key) DO UPDATE SET
                       aliases = ARRAY(
                           SELECT a FROM unnest(entities.aliases || EXCLUDED.aliases)
                               WITH ORDINALITY AS t(a, n)
                           GROUP BY a ORDER BY min(n)),
                       kind = CASE WHEN entities.kind = '' THEN EXCLUDED.kind
                                   ELSE entities.kind END
                   WHERE NOT (EXCLUDED.aliases <@ entities.aliases)
                      OR (entities.kind = '' AND EXCLUDED.kind <> '')
                   RETURNING entity_id, aliases, (xmax = 0) AS inserted""",
                uuid.uuid4(),
                batch.scope_id,
                e.name,
                e.name_key,
                list(e.aliases),
                e.kind,
            )
            if row is not None:
                await conn.execute(
                    "UPDATE entities SET alias_keys = $2::text[] WHERE entity_id = $1",
                    row["entity_id"],
                    alias_keys(row["aliases"]),
                )
            if row is not None and row["inserted"]:
                counts.created += 1
            else:
                counts.deduplicated += 1

    async def _ingest_facts(
        self,
        conn: asyncpg.Connection,
        batch: IngestBatch,
        source_pks: dict[str, uuid.UUID],
        counts: Counts,
        outbox: Outbox,
    ) -> None:
        if not batch.facts:
            return
        keys = sorted({f.fact_key for f in batch.facts})
        current: dict[str, tuple[uuid.UUID, str]] = {
            r["fact_key"]: (r["version_id"], r["state"])
            for r in await conn.fetch(
                """SELECT fact_key, version_id, state FROM facts
                   WHERE fact_key = ANY($1::text[]) AND superseded_at IS NULL""",
                keys,
            )
        }
        asserted: set[tuple[str, uuid.UUID | None]] = {
            (r["fact_key"], r["source_pk"])
            for r in await conn.fetch(
                """SELECT fact_key, source_pk FROM assertions
                   WHERE fact_key = ANY($1::text[]) AND status = 'verified'""",
                keys,
            )
        }
        types = {s.source_id: s.source_type for s in batch.sources}
        for f in batch.facts:
            source_pk = source_pks.get(f.source_id) if f.source_id else None
            existing = current.get(f.fact_key)
            if existing is not None and existing[1] == FactState.ACTIVE.value:
                counts.deduplicated += 1
                version_id = existing[0]
            else:
                # New, or a proposal / retracted fact now published as curated truth.
                if existing is not None:
                    await close_version(conn, existing[0])
                version_id = await insert_version(
                    conn,
                    **curated_columns(f, batch.scope_id),
                    source_type=await self._source_type(conn, f.source_id, source_pk, types),
                    created_by=batch.principal_id,
                )
                current[f.fact_key] = (version_id, FactState.ACTIVE.value)
                counts.created += 1
                outbox.add(ChangeKind.FACT_UPSERTED, batch.scope_id, version_id=version_id)
            if (f.fact_key, source_pk) in asserted:
                continue
            asserted.add((f.fact_key, source_pk))
            assertion_id = await insert_assertion(
                conn,
                fact_key=f.fact_key,
                scope_id=batch.scope_id,
                source_pk=source_pk,
                trust_tier=f.trust_tier,
                authority=f.authority,
                status="verified",
                asserted_by=batch.principal_id,
            )
            if f.evidence or f.locator:
                await insert_evidence(conn, assertion_id, [(f.evidence, f.locator)])
            # The version's citations changed: indexers re-read it.
            outbox.add(ChangeKind.FACT_UPSERTED, batch.scope_id, version_id=version_id)

    @staticmethod
    async def _source_type(
        conn: asyncpg.Connection,
        source_id: str,
        source_pk: uuid.UUID | None,
        types: dict[str, str],
    ) -> str:
        """The source type of a fact's primary source (the batch's, else the stored one)."""
        if not source_id or source_pk is None:
            return ""
        if source_id not in types:
            types[source_id] = (
                await conn.fetchval(
                    "SELECT source_type FROM sources WHERE source_pk = $1", source_pk
                )
                or ""
            )
        return types[source_id]

    # --- proposals ----------------------------------------------------------------------

    async def propose(self, proposal: Proposal) -> ProposalResult:
        outbox = Outbox(actor_id=proposal.principal_id)
        identity = proposal.context.identity()
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [proposal.fact_key, f"task:{proposal.principal_id}:{identity}"])
            findings = await self._findings(conn, proposal, identity)
            decision = domain.decide_proposal(proposal, findings, self._ontology)
            if decision.outcome is Outcome.CREATED:
                await self._create_proposal(conn, proposal, outbox)
            attempt_id = await _insert_attempt(
                conn, proposal, decision, (proposal.subject, proposal.predicate, proposal.object)
            )
            fact = None
            if decision.outcome in (Outcome.CREATED, Outcome.DEDUPLICATED, Outcome.SKIPPED):
                views = await self.facts(
                    conn,
                    scope_ids=proposal.lookup_scope_ids,
                    fact_keys=[decision.fact_key],
                    live_only=False,
                    valid_filter=False,
                )
                fact = views[0] if views else None
            await outbox.flush(conn)
        return ProposalResult(attempt_id=attempt_id, decision=decision, fact=fact)

    async def record_refusal(self, proposal: Proposal, field_name: str, reason: str) -> None:
        """Appends the ``rejected`` attempt of a proposal the policy refused: its reason
        and task context, none of its text (it may be the credential that was refused)."""
        refused = domain.refused_attempt(proposal, field_name)
        async with self._pool.acquire() as conn:
            await _insert_attempt(
                conn, refused, ProposalDecision(Outcome.REJECTED, reason), ("", "", "")
            )

    async def _findings(
        self, conn: asyncpg.Connection, proposal: Proposal, identity: str
    ) -> ProposalFindings:
        scopes = list(proposal.lookup_scope_ids)
        # Shared truth outside the personal scope wins over a verified personal copy.
        known = await conn.fetchval(
            """SELECT fact_key FROM facts
               WHERE scope_id = ANY($1::uuid[]) AND subject_norm = $2 AND predicate_norm = $3
                 AND object_norm = $4 AND state = 'ACTIVE' AND superseded_at IS NULL
                 AND (valid_from IS NULL OR valid_from <= now())
                 AND (valid_to IS NULL OR valid_to > now())
               ORDER BY scope_id = $5, recorded_at LIMIT 1""",
            scopes,
            proposal.subject_norm,
            proposal.predicate_norm,
            proposal.object_norm,
            proposal.personal_scope_id,
        )
        conflicts: tuple[str, ...] = ()
        if known is None and self._ontology.is_single_valued(proposal.predicate):
            conflicts = tuple(
                r["fact_key"]
                for r in await conn.fetch(
                    """SELECT DISTINCT fact_key FROM facts
                       WHERE scope_id = ANY($1::uuid[]) AND subject_norm = $2
                         AND predicate_norm = $3 AND object_norm <> $4 AND state = 'ACTIVE'
                         AND superseded_at IS NULL
                         AND (valid_from IS NULL OR valid_from <= now())
                         AND (valid_to IS NULL OR valid_to > now())
                       ORDER BY fact_key""",
                    scopes,
                    proposal.subject_norm,
                    proposal.predicate_norm,
                    proposal.object_norm,
                )
            )
        state = await conn.fetchval(
            "SELECT state FROM facts WHERE fact_key = $1 AND superseded_at IS NULL",
            proposal.fact_key,
        )
        created = await conn.fetchval(
            """SELECT count(*) FROM proposal_attempts
               WHERE principal_id = $1 AND task_identity = $2 AND outcome = 'created'""",
            proposal.principal_id,
            identity,
        )
        return ProposalFindings(
            known_fact_key=known,
            conflicting_fact_keys=conflicts,
            pending_in_personal_scope=state == FactState.PROPOSED.value,
            created_in_task=created,
        )

    async def _create_proposal(
        self, conn: asyncpg.Connection, proposal: Proposal, outbox: Outbox
    ) -> None:
        # A retracted proposal proposed again becomes a new PROPOSED version.
        await conn.execute(
            "UPDATE facts SET superseded_at = now() WHERE fact_key = $1 AND superseded_at IS NULL",
            proposal.fact_key,
        )
        version_id = await insert_version(
            conn,
            fact_key=proposal.fact_key,
            scope_id=proposal.personal_scope_id,
            subject=proposal.subject,
            predicate=proposal.predicate,
            object=proposal.object,
            subject_norm=proposal.subject_norm,
            predicate_norm=proposal.predicate_norm,
            object_norm=proposal.object_norm,
            state=FactState.PROPOSED.value,
            trust_tier=domain.PROPOSAL_TRUST_TIER,
            authority=domain.PROPOSAL_AUTHORITY,
            origin="proposal",
            created_by=proposal.principal_id,
        )
        assertion_id = await insert_assertion(
            conn,
            fact_key=proposal.fact_key,
            scope_id=proposal.personal_scope_id,
            source_pk=None,
            trust_tier=domain.PROPOSAL_TRUST_TIER,
            authority=domain.PROPOSAL_AUTHORITY,
            status="pending",
            asserted_by=proposal.principal_id,
        )
        if proposal.evidence_text:
            await insert_evidence(conn, assertion_id, [(proposal.evidence_text, "")])
        outbox.add(ChangeKind.FACT_UPSERTED, proposal.personal_scope_id, version_id=version_id)
        await record_proposal_targets(conn, proposal, version_id)

    async def retract(
        self, principal_id: uuid.UUID, personal_scope_id: uuid.UUID, fact_key: str
    ) -> tuple[RetractionStatus, FactView]:
        outbox = Outbox(actor_id=principal_id)
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [fact_key])
            row = await conn.fetchrow(
                "SELECT version_id, scope_id, state FROM facts"
                " WHERE fact_key = $1 AND superseded_at IS NULL",
                fact_key,
            )
            if row is None or row["scope_id"] != personal_scope_id:
                raise InvalidInput("fact_key", "no such proposal", reason="not_found")
            if row["state"] == FactState.RETRACTED.value:
                status = RetractionStatus.ALREADY_RETRACTED
            elif row["state"] == FactState.PROPOSED.value:
                status = RetractionStatus.RETRACTED
                await close_version(conn, row["version_id"])
                version_id = await insert_version(
                    conn, copy_of=row["version_id"], state=FactState.RETRACTED.value
                )
                await conn.execute(
                    """UPDATE assertions SET status = 'withdrawn', withdrawn_at = now(),
                       status_before_withdrawal = status
                       WHERE fact_key = $1 AND status = 'pending'""",
                    fact_key,
                )
                outbox.add(ChangeKind.FACT_UPSERTED, personal_scope_id, version_id=version_id)
            else:
                raise InvalidInput("fact_key", "not a pending proposal", reason="not_pending")
            views = await self.facts(
                conn,
                scope_ids=[personal_scope_id],
                fact_keys=[fact_key],
                live_only=False,
                valid_filter=False,
            )
            await outbox.flush(conn)
        return status, views[0]

    async def proposal_report(
        self,
        principal_id: uuid.UUID,
        context: TaskContext,
        page_size: int,
        after_seq: int,
    ) -> ProposalReport:
        p = Params()
        where = [f"principal_id = {p(principal_id)}"]
        for column in ("runtime", "session_ref", "task_ref", "repository_ref"):
            value = getattr(context, column)
            if value:
                where.append(f"{column} = {p(value)}")
        filtered = " AND ".join(where)
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            outcome_rows = await conn.fetch(
                f"SELECT outcome, count(*) AS n FROM proposal_attempts WHERE {filtered}"
                " GROUP BY outcome",
                *p.values,
            )
            # Current state of every fact the report touches (DISPUTED included).
            sv = len(p.values) + 1
            state_rows = await conn.fetch(
                f"""SELECT f.fact_key, f.state, f.superseded_by, {_conflicts(f"${sv}", None)}
                    FROM facts f
                    WHERE f.superseded_at IS NULL AND f.fact_key IN (
                        SELECT fact_key FROM proposal_attempts WHERE {filtered})""",
                *p.values,
                self._single_valued,
            )
            after = len(p.values) + 1
            page = await conn.fetch(
                f"""SELECT * FROM proposal_attempts WHERE {filtered} AND seq > ${after}
                    ORDER BY seq LIMIT ${after + 1}""",
                *p.values,
                after_seq,
                page_size + 1,
            )
        states = {
            r["fact_key"]: domain.displayed_state(r["state"], tuple(r["conflicting_fact_keys"]))
            for r in state_rows
        }
        successors = {r["fact_key"]: r["superseded_by"] or "" for r in state_rows}
        outcome_counts = {o.value: 0 for o in Outcome}
        for r in outcome_rows:
            outcome_counts[r["outcome"]] = r["n"]
        state_counts: dict[str, int] = {}
        for state in states.values():
            state_counts[state.value.lower()] = state_counts.get(state.value.lower(), 0) + 1
        more = len(page) > page_size
        page = page[:page_size]
        attempts = tuple(
            domain.AttemptView(
                attempt_id=r["attempt_id"],
                seq=r["seq"],
                outcome=Outcome(r["outcome"]),
                reason=r["reason"],
                fact_key=r["fact_key"],
                subject=r["subject"],
                predicate=r["predicate"],
                object=r["object"],
                fact_state=states.get(r["fact_key"]),
                context=TaskContext(
                    r["runtime"], r["session_ref"], r["task_ref"], r["repository_ref"]
                ),
                created_at=r["created_at"],
                superseded_by=successors.get(r["fact_key"], ""),
                conflicting_fact_keys=tuple(r["conflicting_fact_keys"] or ()),
            )
            for r in page
        )
        return ProposalReport(
            attempts=attempts,
            next_page_token=page_tokens.encode_position(page[-1]["seq"]) if more else "",
            outcome_counts=outcome_counts,
            state_counts=state_counts,
            total_attempts=sum(outcome_counts.values()),
        )

    # --- feedback -----------------------------------------------------------------------

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


async def _insert_attempt(
    conn: asyncpg.Connection,
    proposal: Proposal,
    decision: ProposalDecision,
    text: tuple[str, str, str],
) -> uuid.UUID:
    """One row of the end-of-task report; ``text`` is the subject, predicate and object
    it shows."""
    attempt_id = uuid.uuid4()
    ctx = proposal.context
    await conn.execute(
        """INSERT INTO proposal_attempts (
               attempt_id, principal_id, scope_id, fact_key, subject, predicate, object,
               outcome, reason, conflicting_fact_keys, runtime, session_ref, task_ref,
               repository_ref, task_identity, branch, code_path)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text[], $11, $12, $13,
                   $14, $15, $16, $17)""",
        attempt_id,
        proposal.principal_id,
        proposal.personal_scope_id,
        decision.fact_key,
        *text,
        decision.outcome.value,
        decision.reason,
        list(decision.conflicting_fact_keys),
        ctx.runtime,
        ctx.session_ref,
        ctx.task_ref,
        ctx.repository_ref,
        ctx.identity(),
        proposal.location.branch,
        proposal.location.code_path,
    )
    return attempt_id


# A source line that leaves a field empty keeps its stored value, so a refresh line needs
# only the id and the new observed_at (docs/knowledge-model.md, "Refreshing a source").
_KEPT = "coalesce(nullif(EXCLUDED.{column}, ''), sources.{column})"


def _cites(assertion: AssertionView) -> bool:
    return assertion.supports and assertion.verification is not domain.Verification.WITHDRAWN
