"""The asyncpg adapter of erasure: a principal's personal knowledge (GDPR-style deletion).

Everything in the principal's personal scope (fact versions, assertions, evidence,
entities, sources, communities, the proposal bookkeeping that points at those versions)
and everything keyed by the principal (proposal attempts, feedback) is deleted in one
transaction. The outbox rows of the scope go too (the change log must not keep pointing
at, or describing, erased versions); one ``fact_erased`` row per deleted version is
appended so retrieval deletes its documents and vectors. Shared facts that a curator
verified from the principal's proposals live in the shared project, are attributed to the
curator, and stay. The audit event holds ids, counts and the time: never content.
"""

from __future__ import annotations

import uuid

import asyncpg

from .domain import ChangeKind
from .outbox import Outbox, change_position, lock_outbox
from .store import KnowledgeStore

AUDIT_PRINCIPAL_ERASED = "principal_data_erased"


class ErasureStore:
    def __init__(self, store: KnowledgeStore) -> None:
        self._store = store

    async def erase_principal_data(
        self,
        *,
        actor_id: uuid.UUID,
        principal_id: uuid.UUID,
        personal_scope_id: uuid.UUID,
        related_counts: dict[str, int],
    ) -> tuple[dict[str, int], uuid.UUID, int]:
        """Deletes it all in one transaction; the rows deleted per table, the audit
        event's id and the change position after the erasure."""
        return await _erase(self._store.pool, actor_id, principal_id, personal_scope_id,
                            related_counts)


async def _erase(
    pool: asyncpg.Pool,
    actor_id: uuid.UUID,
    principal_id: uuid.UUID,
    personal_scope_id: uuid.UUID,
    related_counts: dict[str, int],
) -> tuple[dict[str, int], uuid.UUID, int]:
    scope = personal_scope_id
    counts: dict[str, int] = {}

    async def delete(name: str, sql: str, *args: object) -> None:
        status = await conn.execute(sql, *args)
        counts[name] = counts.get(name, 0) + int(status.split()[-1])

    async with pool.acquire() as conn, conn.transaction():
        # Appending to the outbox takes the writers' lock: positions stay in commit order.
        await lock_outbox(conn)
        versions = [
            r["version_id"]
            for r in await conn.fetch("SELECT version_id FROM facts WHERE scope_id = $1", scope)
        ]
        await delete(
            "community_facts",
            """DELETE FROM community_facts WHERE version_id = ANY($1::uuid[])
               OR community_id IN (SELECT community_id FROM communities WHERE scope_id = $2)""",
            versions,
            scope,
        )
        await delete("communities", "DELETE FROM communities WHERE scope_id = $1", scope)
        await delete("community_runs", "DELETE FROM community_runs WHERE scope_id = $1", scope)
        await delete(
            "proposal_targets",
            "DELETE FROM proposal_targets WHERE version_id = ANY($1::uuid[])",
            versions,
        )
        # The review record of a verified proposal; the verified shared fact (its own
        # version in the shared project, created_by the curator) is not touched.
        await delete(
            "proposal_reviews",
            "DELETE FROM proposal_reviews WHERE version_id = ANY($1::uuid[])",
            versions,
        )
        await delete(
            "evidence",
            """DELETE FROM evidence WHERE assertion_id IN
               (SELECT assertion_id FROM assertions WHERE scope_id = $1)""",
            scope,
        )
        await delete("assertions", "DELETE FROM assertions WHERE scope_id = $1", scope)
        await delete(
            "outbox",
            "DELETE FROM outbox WHERE scope_id = $1 OR version_id = ANY($2::uuid[])",
            scope,
            versions,
        )
        await delete("facts", "DELETE FROM facts WHERE scope_id = $1", scope)
        await delete(
            "source_versions",
            """DELETE FROM source_versions WHERE source_pk IN
               (SELECT source_pk FROM sources WHERE scope_id = $1)""",
            scope,
        )
        await delete("sources", "DELETE FROM sources WHERE scope_id = $1", scope)
        await delete("entities", "DELETE FROM entities WHERE scope_id = $1", scope)
        await delete(
            "proposal_attempts",
            "DELETE FROM proposal_attempts WHERE principal_id = $1 OR scope_id = $2",
            principal_id,
            scope,
        )
        await delete(
            "feedback",
            "DELETE FROM retrieval_feedback WHERE principal_id = $1 OR scope_id = $2",
            principal_id,
            scope,
        )
        erased = Outbox(actor_id=actor_id)
        for v in versions:
            erased.add(ChangeKind.FACT_ERASED, scope, ref=str(v))
        await erased.flush(conn)
        event_id = uuid.uuid4()
        await conn.execute(
            """INSERT INTO audit_events (event_id, action, actor_id, scope_id, target,
                   reason, details)
               VALUES ($1, $2, $3, $4, $5, '', $6::jsonb)""",
            event_id,
            AUDIT_PRINCIPAL_ERASED,
            actor_id,
            scope,
            str(principal_id),
            {"counts": counts, "related_counts": related_counts},  # the pool encodes jsonb
        )
        position = await change_position(conn)
    return counts, event_id, int(position)
