"""The asyncpg adapter of fact reads, which every other store shares with its pool:
facts by key, version or rank, their assertions and citations, and the raw change log.

The writers are their own stores (``ingest_store``, ``proposal_store``,
``feedback_store``, ``curation_store``, ``correction_store``), each running one
transaction per call through the write kernel (``outbox``); reads are one or two queries
per call.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from . import domain
from .domain import (
    AssertionView,
    ChangeKind,
    ChangesPage,
    ChangeView,
    EvidenceView,
    FactView,
    Ontology,
    SourceView,
    Total,
)
from .graph import ConflictFilter

_FACT_COLUMNS = """
    f.version_id, f.fact_key, f.scope_id, f.subject, f.predicate, f.object, f.state,
    f.trust_tier, f.authority, f.valid_from, f.valid_to, f.recorded_at, f.superseded_at,
    f.repository, f.branch, f.code_path, f.document_type, f.source_type,
    f.superseded_by, f.corrects
"""

_LIVE = "('ACTIVE', 'PROPOSED')"


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


def conflicts_sql(single_valued: str, known_as_of: str | None, as_of: str | None = None) -> str:
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
            f"SELECT {_FACT_COLUMNS}, {conflicts_sql(single_valued, known, at_as_of)}"
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
                       a.drift_reason, a.drift_detected_at,
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
                    drift_reason=_drift_known(r, known_as_of),
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


def _cites(assertion: AssertionView) -> bool:
    return assertion.supports and assertion.verification is not domain.Verification.WITHDRAWN


def _drift_known(r: asyncpg.Record, known_as_of: datetime | None) -> str:
    """The assertion's drift mark as known at ``known_as_of`` (none before it was found)."""
    found = r["drift_detected_at"]
    if known_as_of is None or (found is not None and found <= known_as_of):
        return str(r["drift_reason"])
    return ""
