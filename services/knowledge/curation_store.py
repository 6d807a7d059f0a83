"""SQL of curation: pending proposals, verify, reject, source retraction, audit events.

Every decision runs in one transaction that appends its change-log (outbox) rows last,
exactly like the knowledge store's writes, so indexers see each new fact version.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from vera import page_tokens
from vera.db import audit
from vera.errors import InvalidInput

from . import curation, domain
from .curation import (
    ConflictedPage,
    ConflictedView,
    PendingPage,
    PendingSource,
    PendingView,
    RejectIn,
    RejectResult,
    RetractSourceIn,
    RetractSourceResult,
    SourcePage,
    SourceRow,
    VerifyIn,
    VerifyResult,
)
from .domain import ChangeKind, FactState, FactView, ProposalLocation, TaskContext
from .ingest import Counts, SourceIn
from .outbox import (
    Outbox,
    change_position,
    close_version,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
    upsert_sources,
)
from .store import KnowledgeStore, bounded_count


async def _close_into(
    conn: asyncpg.Connection, version_id: uuid.UUID, state: FactState, superseded_by: str = ""
) -> uuid.UUID:
    """Closes a current version and records its successor in ``state``; returns its id."""
    await close_version(conn, version_id)
    return await insert_version(
        conn, copy_of=version_id, state=state.value, superseded_by=superseded_by
    )


class _Preview(Exception):
    """Leaves a validate-only retraction's transaction, which rolls it back."""

    def __init__(self, result: RetractSourceResult) -> None:
        self.result = result


class CurationStore:
    def __init__(self, facts: KnowledgeStore, *, max_counted_rows: int = 1000) -> None:
        self._pool = facts.pool
        self._facts = facts
        # List totals count up to this many rows (KnowledgeSettings.max_counted_rows).
        self._count_limit = max_counted_rows

    async def _view(self, conn: asyncpg.Connection, scope_id: uuid.UUID, key: str) -> FactView:
        views = await self._facts.facts(
            conn, scope_ids=[scope_id], fact_keys=[key], live_only=False, valid_filter=False
        )
        return views[0]

    # --- pending proposals ----------------------------------------------------------------

    async def queue(self) -> tuple[int, datetime | None]:
        """Proposals awaiting review in every project, and when the oldest was proposed."""
        row = await self._pool.fetchrow(
            """SELECT count(*) AS size, min(recorded_at) AS oldest FROM facts
               WHERE superseded_at IS NULL AND state = 'PROPOSED'"""
        )
        return int(row["size"]), row["oldest"]

    async def list_pending(self, scope_id: uuid.UUID, page_size: int, after: int) -> PendingPage:
        pending = """
            FROM proposal_targets t JOIN facts f ON f.version_id = t.version_id
            WHERE t.scope_id = $1 AND f.superseded_at IS NULL AND f.state = 'PROPOSED'
        """
        single_valued = sorted(self._facts.ontology.single_valued_predicates)
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            total = await bounded_count(
                conn, f"SELECT 1 {pending}", [scope_id], self._count_limit
            )
            rows = await conn.fetch(
                f"""SELECT t.seq, f.fact_key, f.version_id, f.created_by, f.subject, f.predicate,
                           f.object, f.recorded_at, f.repository,
                           (SELECT row(s.source_id, coalesce(e.locator, ''), s.uri,
                                       s.observed_at)
                            FROM assertions a JOIN sources s ON s.source_pk = a.source_pk
                            LEFT JOIN LATERAL (SELECT x.locator FROM evidence x
                                               WHERE x.assertion_id = a.assertion_id
                                               ORDER BY x.recorded_at, x.evidence_id
                                               LIMIT 1) e ON true
                            WHERE a.fact_key = f.fact_key AND a.status = 'pending'
                            ORDER BY a.recorded_at LIMIT 1) AS cited,
                           ARRAY(SELECT e.text FROM assertions a
                                 JOIN evidence e ON e.assertion_id = a.assertion_id
                                 WHERE a.fact_key = f.fact_key AND a.status = 'pending'
                                 ORDER BY e.recorded_at, e.evidence_id) AS evidence,
                           (SELECT row(pa.runtime, pa.session_ref, pa.task_ref,
                                       pa.repository_ref, pa.branch, pa.code_path)
                            FROM proposal_attempts pa
                            WHERE pa.fact_key = f.fact_key AND pa.outcome = 'created'
                            ORDER BY pa.seq DESC LIMIT 1) AS context,
                           (SELECT k.fact_key FROM facts k
                            WHERE k.scope_id = $1 AND k.superseded_at IS NULL
                              AND k.state = 'ACTIVE' AND k.subject_norm = f.subject_norm
                              AND k.predicate_norm = f.predicate_norm
                              AND k.object_norm = f.object_norm LIMIT 1) AS known,
                           CASE WHEN f.predicate_norm = ANY($4::text[]) THEN ARRAY(
                               SELECT DISTINCT c.fact_key FROM facts c
                               WHERE c.scope_id = $1 AND c.superseded_at IS NULL
                                 AND c.state = 'ACTIVE' AND c.subject_norm = f.subject_norm
                                 AND c.predicate_norm = f.predicate_norm
                                 AND c.object_norm <> f.object_norm ORDER BY c.fact_key)
                           ELSE ARRAY[]::text[] END AS conflicts
                    {pending} AND t.seq > $2 ORDER BY t.seq LIMIT $3""",
                scope_id,
                after,
                page_size + 1,
                single_valued,
            )
        more = len(rows) > page_size
        rows = rows[:page_size]
        proposals = tuple(
            PendingView(
                fact_key=r["fact_key"],
                version_id=r["version_id"],
                proposer_id=r["created_by"],
                subject=r["subject"],
                predicate=r["predicate"],
                object=r["object"],
                evidence=tuple(r["evidence"]),
                context=TaskContext(*r["context"][:4]) if r["context"] else TaskContext(),
                location=(
                    ProposalLocation(*r["context"][4:]) if r["context"] else ProposalLocation()
                ),
                proposed_at=r["recorded_at"],
                conflicting_fact_keys=tuple(r["conflicts"]),
                known_fact_key=r["known"] or "",
                source=(PendingSource(*r["cited"]) if r["cited"] else None),
                repository=r["repository"],
            )
            for r in rows
        )
        token = page_tokens.encode_position(rows[-1]["seq"]) if more else ""
        return PendingPage(proposals, token, total)

    async def list_conflicted(
        self, scope_id: uuid.UUID, page_size: int, before: int
    ) -> ConflictedPage:
        """Conflicted attempts that contradict facts of the project, newest first, before
        the attempt ``before`` (a keyset on the attempt sequence; 0 starts at the newest)."""
        conflicted = """
            FROM (SELECT pa.*, ARRAY(
                      SELECT DISTINCT k FROM unnest(pa.conflicting_fact_keys) AS k
                      WHERE EXISTS (SELECT 1 FROM facts c
                                    WHERE c.fact_key = k AND c.scope_id = $1)
                      ORDER BY k) AS contradicted
                  FROM proposal_attempts pa WHERE pa.outcome = 'conflicted') a
            WHERE cardinality(a.contradicted) > 0
        """
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            total = await bounded_count(
                conn, f"SELECT 1 {conflicted}", [scope_id], self._count_limit
            )
            rows = await conn.fetch(
                f"""SELECT a.attempt_id, a.seq, a.principal_id, a.subject, a.predicate,
                           a.object, a.contradicted, a.runtime, a.session_ref, a.task_ref,
                           a.repository_ref, a.branch, a.code_path, a.created_at
                    {conflicted} AND ($2 = 0 OR a.seq < $2) ORDER BY a.seq DESC LIMIT $3""",
                scope_id,
                before,
                page_size + 1,
            )
        more = len(rows) > page_size
        rows = rows[:page_size]
        attempts = tuple(
            ConflictedView(
                attempt_id=r["attempt_id"],
                seq=r["seq"],
                proposer_id=r["principal_id"],
                subject=r["subject"],
                predicate=r["predicate"],
                object=r["object"],
                contradicted_fact_keys=tuple(r["contradicted"]),
                context=TaskContext(
                    r["runtime"], r["session_ref"], r["task_ref"], r["repository_ref"]
                ),
                attempted_at=r["created_at"],
                location=ProposalLocation(r["branch"], r["code_path"]),
            )
            for r in rows
        )
        token = page_tokens.encode_position(rows[-1]["seq"]) if more else ""
        return ConflictedPage(attempts, token, total)

    async def _pending(
        self, conn: asyncpg.Connection, scope_id: uuid.UUID, fact_key: str
    ) -> asyncpg.Record:
        """The current version of a proposal addressed to the project, still PROPOSED."""
        row = await conn.fetchrow(
            """SELECT f.version_id, f.scope_id, f.state, f.subject, f.predicate, f.object,
                      f.created_by,
                      EXISTS (SELECT 1 FROM proposal_targets t
                              WHERE t.fact_key = f.fact_key AND t.scope_id = $2) AS addressed
               FROM facts f WHERE f.fact_key = $1 AND f.superseded_at IS NULL
                 AND f.origin = 'proposal'""",
            fact_key,
            scope_id,
        )
        if row is None or not row["addressed"]:
            raise curation.not_pending()
        if row["state"] != FactState.PROPOSED.value:
            raise InvalidInput("fact_key", "already decided", reason="not_pending")
        return row

    # --- settings ----------------------------------------------------------------------------

    async def settings(self, scope_id: uuid.UUID) -> curation.CurationSettings:
        async with self._pool.acquire() as conn:
            return await _settings(conn, scope_id)

    async def set_settings(self, principal_id: uuid.UUID, scope_id: uuid.UUID,
                           settings: curation.CurationSettings) -> curation.CurationSettings:
        async with self._pool.acquire() as conn:
            await conn.execute(
                """INSERT INTO curation_settings (scope_id, two_person_verification, changed_by)
                   VALUES ($1, $2, $3)
                   ON CONFLICT (scope_id) DO UPDATE SET
                       two_person_verification = EXCLUDED.two_person_verification,
                       changed_by = EXCLUDED.changed_by, changed_at = now()""",
                scope_id, settings.two_person_verification, principal_id)
            return await _settings(conn, scope_id)

    # --- verify / reject --------------------------------------------------------------------

    async def verify(self, req: VerifyIn) -> VerifyResult:
        outbox = Outbox(actor_id=req.curator_id)
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [req.fact_key])
            row = await self._pending(conn, req.scope_id, req.fact_key)
            curation.check_verifier(await _settings(conn, req.scope_id), row["created_by"],
                                    req.curator_id)
            target_key = domain.fact_key(
                req.scope_id, row["subject"], row["predicate"], row["object"]
            )
            await lock_keys(conn, [target_key])
            current = await conn.fetchrow(
                "SELECT version_id, state FROM facts"
                " WHERE fact_key = $1 AND superseded_at IS NULL",
                target_key,
            )
            already_active = current is not None and current["state"] == FactState.ACTIVE.value
            if already_active:
                target_version = current["version_id"]
            else:
                if current is not None:
                    await close_version(conn, current["version_id"])
                # An agent's proposal carries no valid times or code anchors, a bulk
                # proposal (a harvest) its file's: whatever it has travels with it.
                target_version = await insert_version(
                    conn,
                    copy_of=row["version_id"],
                    fact_key=target_key,
                    scope_id=req.scope_id,
                    state=FactState.ACTIVE.value,
                    trust_tier=req.trust_tier,
                    authority=req.authority,
                    created_by=req.curator_id,
                )
            # The proposer's evidence, now reviewed by the curator, travels with the
            # assertion; a bulk proposal's (a harvest's) locator and source with it.
            reviewed = await conn.fetch(
                """SELECT e.text, e.locator, s.source_id, s.source_type, s.title, s.uri,
                          s.observed_at
                   FROM assertions a
                   JOIN evidence e ON e.assertion_id = a.assertion_id
                   LEFT JOIN sources s ON s.source_pk = a.source_pk
                   WHERE a.fact_key = $1 AND a.status = 'pending'
                   ORDER BY e.recorded_at, e.evidence_id""",
                req.fact_key,
            )
            source_pk = await self._carry_source(conn, req, reviewed, outbox)
            assertion_id = await insert_assertion(
                conn,
                fact_key=target_key,
                scope_id=req.scope_id,
                source_pk=source_pk,
                trust_tier=req.trust_tier,
                authority=req.authority,
                status="verified",
                asserted_by=req.curator_id,
            )
            locator = curation.review_locator(req.fact_key)
            await insert_evidence(
                conn, assertion_id, [(r["text"], r["locator"] or locator) for r in reviewed]
            )
            closed = await _close_into(
                conn, row["version_id"], FactState.SUPERSEDED, superseded_by=target_key
            )
            await self._review(conn, row["version_id"], req.fact_key, "verified", req.note,
                               req.curator_id, req.scope_id, target_key)
            outbox.add(ChangeKind.FACT_UPSERTED, req.scope_id, version_id=target_version)
            outbox.add(ChangeKind.FACT_UPSERTED, row["scope_id"], version_id=closed)
            fact = await self._view(conn, req.scope_id, target_key)
            proposal = await self._view(conn, row["scope_id"], req.fact_key)
            await outbox.flush(conn)
            position = await change_position(conn)
        return VerifyResult(fact, proposal, already_active, position)

    async def _carry_source(
        self, conn: asyncpg.Connection, req: VerifyIn, reviewed: list, outbox: Outbox
    ) -> uuid.UUID | None:
        """The project's copy of the source a bulk proposal cited (recorded, or refreshed,
        as ingest records one); None for an agent's proposal, which cites none."""
        cited = next((r for r in reviewed if r["source_id"] is not None), None)
        if cited is None:
            return None
        source = SourceIn(cited["source_id"], cited["source_type"], cited["title"],
                          cited["uri"], cited["observed_at"])
        source_pks: dict[str, uuid.UUID] = {}
        await upsert_sources(conn, req.scope_id, (source,), source_pks, Counts(), outbox)
        return source_pks.get(source.source_id)

    async def reject(self, req: RejectIn) -> RejectResult:
        outbox = Outbox(actor_id=req.curator_id)
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [req.fact_key])
            row = await self._pending(conn, req.scope_id, req.fact_key)
            closed = await _close_into(conn, row["version_id"], FactState.RETRACTED)
            await conn.execute(
                """UPDATE assertions SET status = 'withdrawn', withdrawn_at = now(),
                       status_before_withdrawal = status
                   WHERE fact_key = $1 AND status = 'pending'""",
                req.fact_key,
            )
            await self._review(conn, row["version_id"], req.fact_key, "rejected", req.reason,
                               req.curator_id, req.scope_id, "")
            outbox.add(ChangeKind.FACT_UPSERTED, row["scope_id"], version_id=closed)
            proposal = await self._view(conn, row["scope_id"], req.fact_key)
            await outbox.flush(conn)
            position = await change_position(conn)
        return RejectResult(proposal, position)

    @staticmethod
    async def _review(
        conn: asyncpg.Connection,
        version_id: uuid.UUID,
        fact_key: str,
        decision: str,
        reason: str,
        curator_id: uuid.UUID,
        scope_id: uuid.UUID,
        target_key: str,
    ) -> None:
        await conn.execute(
            """INSERT INTO proposal_reviews (review_id, fact_key, version_id, decision, reason,
                   curator_id, target_scope_id, target_fact_key)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
            uuid.uuid4(),
            fact_key,
            version_id,
            decision,
            reason,
            curator_id,
            scope_id,
            target_key,
        )
        await audit.append(
            conn, str(curator_id),
            curation.AUDIT_PROPOSAL_VERIFIED if decision == "verified"
            else curation.AUDIT_PROPOSAL_REJECTED,
            {"fact_key": fact_key, "scope_id": str(scope_id)})

    # --- source retraction ----------------------------------------------------------------

    async def list_sources(self, scope_id: uuid.UUID, page_size: int, offset: int) -> SourcePage:
        async with self._pool.acquire() as conn:
            total = await bounded_count(
                conn, "SELECT 1 FROM sources WHERE scope_id = $1", [scope_id],
                self._count_limit,
            )
            rows = await conn.fetch(
                """SELECT s.source_id, s.source_type, s.title, s.uri, s.observed_at,
                          s.retracted_at,
                          (SELECT count(DISTINCT f.fact_key) FROM assertions a
                             JOIN facts f ON f.fact_key = a.fact_key
                            WHERE a.source_pk = s.source_pk AND a.status = 'verified'
                              AND f.superseded_at IS NULL AND f.state = 'ACTIVE') AS cited
                   FROM sources s WHERE s.scope_id = $1
                   ORDER BY s.source_id LIMIT $2 OFFSET $3""",
                scope_id, page_size + 1, offset)
        # The next page exists when this one overflows, not when the (bounded) total says so.
        more = len(rows) > page_size
        rows_out = tuple(
            SourceRow(r["source_id"], r["source_type"], r["title"], r["uri"],
                      r["observed_at"], r["cited"], r["retracted_at"])
            for r in rows[:page_size]
        )
        return SourcePage(
            rows_out, page_tokens.encode_position(offset + len(rows_out)) if more else "", total
        )

    async def retract_source(self, req: RetractSourceIn) -> RetractSourceResult:
        """With ``req.validate_only`` the same transaction runs and is rolled back: the
        preview is exactly what the retraction would do, from the same rules."""
        try:
            return await self._retract_source(req)
        except _Preview as preview:
            return preview.result

    async def _retract_source(self, req: RetractSourceIn) -> RetractSourceResult:
        outbox = Outbox(actor_id=req.curator_id)
        async with self._pool.acquire() as conn, conn.transaction():
            source = await conn.fetchrow(
                "SELECT source_pk, retracted_at FROM sources"
                " WHERE scope_id = $1 AND source_id = $2 FOR UPDATE",
                req.scope_id,
                req.source_id,
            )
            if source is None:
                raise InvalidInput("source_id", "no such source in the project", reason="not_found")
            if source["retracted_at"] is not None:
                return RetractSourceResult(True, 0, (), (), None, await change_position(conn))
            keys = [
                r["fact_key"]
                for r in await conn.fetch(
                    "SELECT DISTINCT fact_key FROM assertions"
                    " WHERE source_pk = $1 AND status <> 'withdrawn' ORDER BY fact_key",
                    source["source_pk"],
                )
            ]
            await lock_keys(conn, keys)
            withdrawn = await conn.fetchval(
                """WITH w AS (UPDATE assertions SET status = 'withdrawn', withdrawn_at = now(),
                                  status_before_withdrawal = status
                              WHERE source_pk = $1 AND status <> 'withdrawn' RETURNING 1)
                   SELECT count(*) FROM w""",
                source["source_pk"],
            )
            retracted, supported = await self._settle_facts(conn, keys, outbox)
            await conn.execute(
                "UPDATE sources SET retracted_at = now(), updated_at = now()"
                " WHERE source_pk = $1",
                source["source_pk"],
            )
            outbox.add(ChangeKind.SOURCE_UPSERTED, req.scope_id, ref=req.source_id)
            event_id = uuid.uuid4()
            await conn.execute(
                """INSERT INTO audit_events (event_id, action, actor_id, scope_id, target,
                       reason, details)
                   VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)""",
                event_id,
                curation.AUDIT_SOURCE_RETRACTED,
                req.curator_id,
                req.scope_id,
                req.source_id,
                req.reason,
                # The pool's jsonb codec encodes: pass the object, not a JSON string.
                {
                    "assertions_withdrawn": withdrawn,
                    "retracted_fact_keys": list(retracted),
                    "still_supported_fact_keys": list(supported),
                },
            )
            if req.validate_only:
                raise _Preview(RetractSourceResult(
                    False, withdrawn, retracted, supported, None, await change_position(conn)))
            await outbox.flush(conn)
            position = await change_position(conn)
        return RetractSourceResult(False, withdrawn, retracted, supported, event_id, position)

    @staticmethod
    async def _settle_facts(
        conn: asyncpg.Connection, keys: Sequence[str], outbox: Outbox
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Retracts live facts with no supporting assertion left; re-announces the rest."""
        retracted: list[str] = []
        supported: list[str] = []
        rows = await conn.fetch(
            """SELECT f.fact_key, f.version_id, f.scope_id, f.state,
                      EXISTS (SELECT 1 FROM assertions a WHERE a.fact_key = f.fact_key
                              AND a.supports AND a.status <> 'withdrawn') AS supported
               FROM facts f WHERE f.fact_key = ANY($1::text[]) AND f.superseded_at IS NULL
               ORDER BY f.fact_key""",
            list(keys),
        )
        for r in rows:
            if r["supported"]:
                supported.append(r["fact_key"])
                # Its citations changed: indexers re-read the current version.
                outbox.add(ChangeKind.FACT_UPSERTED, r["scope_id"], version_id=r["version_id"])
            elif r["state"] in domain.LIVE_STATES:
                new_id = await _close_into(conn, r["version_id"], FactState.RETRACTED)
                retracted.append(r["fact_key"])
                outbox.add(ChangeKind.FACT_UPSERTED, r["scope_id"], version_id=new_id)
        return tuple(retracted), tuple(supported)


async def _settings(conn: asyncpg.Connection, scope_id: uuid.UUID) -> curation.CurationSettings:
    row = await conn.fetchrow(
        "SELECT two_person_verification FROM curation_settings WHERE scope_id = $1", scope_id)
    if row is None:
        return curation.CurationSettings()
    return curation.CurationSettings(two_person_verification=row["two_person_verification"])
