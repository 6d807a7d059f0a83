"""The asyncpg adapter of ingest: a curated batch of sources, entities and facts,
written in one transaction through the write kernel (``outbox``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from vera.errors import InvalidInput

from . import ingest
from .domain import ChangeKind, FactState
from .graph import alias_keys
from .ingest import Counts, IngestBatch, IngestResult
from .outbox import (
    Outbox,
    change_position,
    close_version,
    curated_columns,
    insert_assertion,
    insert_evidence,
    insert_version,
    lock_keys,
    upsert_sources,
)
from .store import KnowledgeStore


class IngestStore:
    """Loads curated batches; shares the fact reads' pool."""

    def __init__(self, facts: KnowledgeStore) -> None:
        self._pool = facts.pool
        self._facts = facts

    async def ingest(self, batch: IngestBatch) -> IngestResult:
        result = IngestResult()
        outbox = Outbox(actor_id=batch.principal_id)
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                await lock_keys(conn, [f.fact_key for f in batch.facts])
                known = await _known_sources(conn, batch)
                ingest.check_batch(batch, set(known))
                source_pks = dict(known)
                await upsert_sources(conn, batch.scope_id, batch.sources, source_pks,
                                     result.sources, outbox)
                await self._ingest_entities(conn, batch, result.entities)
                await self._ingest_facts(conn, batch, source_pks, result.facts, outbox)
                await outbox.flush(conn)
            result.change_position = await change_position(conn)
        return result

    async def check(self, batch: IngestBatch, corrected_fact_keys: Sequence[str]) -> None:
        """Refuses what ``ingest`` would refuse, writing nothing; and a fact key a later
        correction names that is neither a current fact of the scope nor one of the
        batch's (``corrected_fact_keys[i]``, not_found)."""
        async with self._pool.acquire() as conn:
            ingest.check_batch(batch, set(await _known_sources(conn, batch)))
            own = {f.fact_key for f in batch.facts}
            wanted = sorted(set(corrected_fact_keys) - own)
            current = {
                r["fact_key"]
                for r in await conn.fetch(
                    """SELECT fact_key FROM facts WHERE scope_id = $1
                       AND fact_key = ANY($2::text[]) AND superseded_at IS NULL""",
                    batch.scope_id,
                    wanted,
                )
            } if wanted else set()
        for i, key in enumerate(corrected_fact_keys):
            if key not in own and key not in current:
                raise InvalidInput(f"corrected_fact_keys[{i}]", "no such fact in scope",
                                   reason="not_found")

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


async def _known_sources(conn: asyncpg.Connection, batch: IngestBatch) -> dict[str, uuid.UUID]:
    """The scope's stored sources that the batch's facts cite and it does not carry."""
    referenced = sorted(batch.referenced_source_ids())
    if not referenced:
        return {}
    return {
        r["source_id"]: r["source_pk"]
        for r in await conn.fetch(
            """SELECT source_id, source_pk FROM sources
               WHERE scope_id = $1 AND source_id = ANY($2::text[])""",
            batch.scope_id,
            referenced,
        )
    }
