"""asyncpg implementation of the snapshot store (schema ``snapshot``)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime

import asyncpg

from vera.services.snapshot.domain import ContextPack

SWEEP_BATCH = 1000

_COLUMNS = (
    "pack_id, principal_id, scope_id, canonical_request, content, request_hash,"
    " content_hash, assembler_version, created_at, expires_at"
)


def _pack(row: asyncpg.Record) -> ContextPack:
    return ContextPack(**dict(row))


def _dedupe_lock_key(pack: ContextPack) -> int:
    key = "|".join(
        (
            str(pack.principal_id),
            str(pack.scope_id),
            pack.request_hash,
            pack.content_hash,
            pack.assembler_version,
        )
    )
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


async def sweep_expired(pool: asyncpg.Pool, now: datetime) -> int:
    """Physically deletes every pack expired at ``now``, in bounded batches; returns the count."""
    deleted = 0
    while True:
        rows = await pool.fetch(
            "DELETE FROM context_packs WHERE pack_id IN ("
            "  SELECT pack_id FROM context_packs WHERE expires_at <= $1 LIMIT $2"
            "  FOR UPDATE SKIP LOCKED)"
            " RETURNING pack_id",
            now,
            SWEEP_BATCH,
        )
        deleted += len(rows)
        if len(rows) < SWEEP_BATCH:
            return deleted


class PgSnapshotStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert_deduplicated(
        self, candidate: ContextPack, now: datetime
    ) -> tuple[ContextPack, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            # Serializes identical concurrent creates so a retry storm stores one pack.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _dedupe_lock_key(candidate))
            existing = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM context_packs"
                " WHERE principal_id = $1 AND scope_id = $2 AND request_hash = $3"
                "   AND content_hash = $4 AND assembler_version = $5 AND expires_at > $6"
                " ORDER BY created_at DESC LIMIT 1",
                candidate.principal_id,
                candidate.scope_id,
                candidate.request_hash,
                candidate.content_hash,
                candidate.assembler_version,
                now,
            )
            if existing is not None:
                return _pack(existing), True
            # Per-scope storage quota (later issue): count or size the scope's live packs
            # here, in this transaction, and raise vera.errors.QuotaExceeded before inserting.
            row = await conn.fetchrow(
                f"INSERT INTO context_packs ({_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                f" RETURNING {_COLUMNS}",
                candidate.pack_id,
                candidate.principal_id,
                candidate.scope_id,
                candidate.canonical_request,
                candidate.content,
                candidate.request_hash,
                candidate.content_hash,
                candidate.assembler_version,
                candidate.created_at,
                candidate.expires_at,
            )
        return _pack(row), False

    async def get_live(
        self, pack_id: uuid.UUID, principal_id: uuid.UUID, now: datetime
    ) -> ContextPack | None:
        row = await self._pool.fetchrow(
            f"SELECT {_COLUMNS} FROM context_packs"
            " WHERE pack_id = $1 AND principal_id = $2 AND expires_at > $3",
            pack_id,
            principal_id,
            now,
        )
        return _pack(row) if row else None

    async def sweep_expired(self, now: datetime) -> int:
        return await sweep_expired(self._pool, now)
