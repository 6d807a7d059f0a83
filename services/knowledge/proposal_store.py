"""The asyncpg adapter of proposals: an agent's proposal (decided by ``domain``),
its attempts for the end-of-task report, the proposer's own retraction.
"""

from __future__ import annotations

import uuid

import asyncpg

from vera import page_tokens
from vera.errors import InvalidInput

from . import domain, proposals
from .domain import ChangeKind, FactState, FactView, Outcome, TaskContext
from .outbox import (
    Outbox,
    close_version,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
    record_proposal_targets,
)
from .proposals import (
    Proposal,
    ProposalDecision,
    ProposalFindings,
    ProposalReport,
    ProposalResult,
    RetractionStatus,
)
from .store import KnowledgeStore, Params, conflicts_sql


class ProposalStore:
    """Proposals and their attempts; shares the fact reads' pool."""

    def __init__(self, facts: KnowledgeStore) -> None:
        self._pool = facts.pool
        self._facts = facts
        self._single_valued = sorted(facts.ontology.single_valued_predicates)

    async def propose(self, proposal: Proposal) -> ProposalResult:
        outbox = Outbox(actor_id=proposal.principal_id)
        identity = proposal.context.identity()
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, [proposal.fact_key, f"task:{proposal.principal_id}:{identity}"])
            findings = await self._findings(conn, proposal, identity)
            decision = proposals.decide_proposal(proposal, findings, self._facts.ontology)
            if decision.outcome is Outcome.CREATED:
                await self._create_proposal(conn, proposal, outbox)
            attempt_id = await _insert_attempt(
                conn, proposal, decision, (proposal.subject, proposal.predicate, proposal.object)
            )
            fact = None
            if decision.outcome in (Outcome.CREATED, Outcome.DEDUPLICATED, Outcome.SKIPPED):
                views = await self._facts.facts(
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
        refused = proposals.refused_attempt(proposal, field_name)
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
        if known is None and self._facts.ontology.is_single_valued(proposal.predicate):
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
            views = await self._facts.facts(
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
                f"""SELECT f.fact_key, f.state, f.superseded_by, {conflicts_sql(f"${sv}", None)}
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
            proposals.AttemptView(
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
