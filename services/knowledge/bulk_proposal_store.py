"""The asyncpg adapter of bulk proposals: a batch of sourced facts (a harvest of a
repository) proposed into the proposer's personal scope and addressed to one project.

Unlike an agent's proposal, each keeps what a curator needs to judge it and what the fact
should carry once verified: its source (recorded in the personal scope, carried into the
project on verification), its locator and evidence, its valid times and its code binding.
A fact the project already holds as active, or this proposer already proposed and is
pending, is not proposed again.
"""

from __future__ import annotations

import uuid

from vera.errors import InvalidInput

from . import domain
from .domain import BulkResult, ChangeKind, FactState
from .ingest import Counts, FactIn, SourceIn
from .outbox import (
    Outbox,
    change_position,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
    upsert_sources,
)
from .store import KnowledgeStore


class BulkProposalStore:
    def __init__(self, store: KnowledgeStore) -> None:
        self._pool = store.pool

    async def propose(self, principal_id: uuid.UUID, personal_scope_id: uuid.UUID,
                      target_scope_id: uuid.UUID, sources: tuple[SourceIn, ...],
                      facts: list[FactIn | None]) -> BulkResult:
        """``facts`` in request order; None for a fact left out (its key stays empty)."""
        result = BulkResult()
        outbox = Outbox(actor_id=principal_id)
        kept = [f for f in facts if f is not None]
        async with self._pool.acquire() as conn, conn.transaction():
            await lock_keys(conn, sorted({f.fact_key for f in kept}))
            source_pks: dict[str, uuid.UUID] = dict(await conn.fetch(
                """SELECT source_id, source_pk FROM sources
                   WHERE scope_id = $1 AND source_id = ANY($2::text[])""",
                personal_scope_id, sorted({f.source_id for f in kept if f.source_id})))
            await upsert_sources(conn, personal_scope_id, sources, source_pks, Counts(), outbox)
            for fact in facts:
                if fact is None:
                    result.fact_keys.append("")
                    continue
                result.fact_keys.append(fact.fact_key)
                if fact.source_id and fact.source_id not in source_pks:
                    raise InvalidInput("facts.source_id", "unknown source", reason="not_found")
                if await self._known(conn, personal_scope_id, target_scope_id, fact):
                    result.deduplicated += 1
                    continue
                version_id = await insert_version(
                    conn, fact_key=fact.fact_key, scope_id=personal_scope_id,
                    subject=fact.subject, predicate=fact.predicate, object=fact.object,
                    subject_norm=fact.subject_norm, predicate_norm=fact.predicate_norm,
                    object_norm=fact.object_norm, state=FactState.PROPOSED.value,
                    trust_tier=domain.PROPOSAL_TRUST_TIER,
                    authority=domain.PROPOSAL_AUTHORITY, origin="proposal",
                    created_by=principal_id, valid_from=fact.valid_from,
                    valid_to=fact.valid_to, repository=fact.repository, branch=fact.branch,
                    code_path=fact.code_path, document_type=fact.document_type)
                assertion_id = await insert_assertion(
                    conn, fact_key=fact.fact_key, scope_id=personal_scope_id,
                    source_pk=source_pks.get(fact.source_id),
                    trust_tier=domain.PROPOSAL_TRUST_TIER,
                    authority=domain.PROPOSAL_AUTHORITY, status="pending",
                    asserted_by=principal_id)
                if fact.evidence or fact.locator:
                    await insert_evidence(conn, assertion_id, [(fact.evidence, fact.locator)])
                await conn.execute(
                    "INSERT INTO proposal_targets (version_id, fact_key, scope_id)"
                    " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                    version_id, fact.fact_key, target_scope_id)
                outbox.add(ChangeKind.FACT_UPSERTED, personal_scope_id, version_id=version_id)
                result.created += 1
            await outbox.flush(conn)
            result.change_position = await change_position(conn)
        return result

    @staticmethod
    async def _known(conn, personal_scope_id: uuid.UUID, target_scope_id: uuid.UUID,
                     fact: FactIn) -> bool:
        """Pending from this proposer already, or an active fact of the project; a
        retracted or decided proposal is closed so the fact can be proposed again."""
        if await conn.fetchval(
            """SELECT 1 FROM facts WHERE scope_id = $1 AND subject_norm = $2
                 AND predicate_norm = $3 AND object_norm = $4 AND state = 'ACTIVE'
                 AND superseded_at IS NULL LIMIT 1""",
            target_scope_id, fact.subject_norm, fact.predicate_norm, fact.object_norm,
        ):
            return True
        current = await conn.fetchrow(
            "SELECT version_id, state FROM facts WHERE fact_key = $1 AND superseded_at IS NULL",
            fact.fact_key)
        if current is None:
            return False
        if current["state"] == FactState.PROPOSED.value:
            return True
        await conn.execute(
            "UPDATE facts SET superseded_at = now() WHERE version_id = $1",
            current["version_id"])
        return False
