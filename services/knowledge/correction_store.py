"""The asyncpg adapter of corrections: a curator replaces a fact with a corrected one in
one transaction through the write kernel (``outbox``).
"""

from __future__ import annotations

import uuid

import asyncpg

from vera.errors import InvalidInput

from .domain import ChangeKind, FactState, FactView
from .ingest import FactIn
from .outbox import (
    Outbox,
    close_version,
    curated_columns,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
)
from .store import KnowledgeStore


class CorrectionStore:
    """Curator corrections; shares the fact reads' pool."""

    def __init__(self, store: KnowledgeStore) -> None:
        self._store = store
        self._pool = store.pool
        self._ontology = store.ontology

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
