"""asyncpg implementation of the snapshot store (schema ``snapshot``)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from vera.errors import QuotaExceeded
from vera.services.snapshot.domain import ContextPack
from vera.services.snapshot.idempotency import Begun, KeyState
from vera.services.snapshot.snapshots import FrozenFact, Snapshot

PACK_STORAGE_BUCKET = "context_pack_storage"

SWEEP_BATCH = 1000

_COLUMNS = (
    "pack_id, principal_id, scope_id, canonical_request, content, request_hash,"
    " content_hash, assembler_version, created_at, expires_at"
)


def _pack(row: asyncpg.Record) -> ContextPack:
    return ContextPack(**dict(row))


def _lock_key(*parts: str) -> int:
    key = "|".join(parts)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


def _stored_bytes(pack: ContextPack) -> int:
    """What a pack costs against its scope's storage quota: its stored JSON."""
    return len(json.dumps(pack.canonical_request).encode()) + len(json.dumps(pack.content).encode())


async def sweep_expired(pool: asyncpg.Pool, now: datetime) -> int:
    """Physically deletes every pack expired at ``now``, in bounded batches, and every lapsed
    idempotency key; returns how many packs."""
    await pool.execute("DELETE FROM idempotency_keys WHERE expires_at <= $1", now)
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
    def __init__(self, pool: asyncpg.Pool, quota_bytes_per_scope: int | None = None) -> None:
        self._pool = pool
        self._quota_bytes = quota_bytes_per_scope

    async def insert_deduplicated(
        self, candidate: ContextPack, now: datetime
    ) -> tuple[ContextPack, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            # Serializes creates in one scope: a retry storm stores one pack, and the quota
            # check below sees every pack committed before it.
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1)", _lock_key("pack", str(candidate.scope_id))
            )
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
            if self._quota_bytes is not None:
                used = await conn.fetchval(
                    "SELECT coalesce(sum(octet_length(canonical_request::text)"
                    " + octet_length(content::text)), 0)"
                    " FROM context_packs WHERE scope_id = $1 AND expires_at > $2",
                    candidate.scope_id,
                    now,
                )
                if used + _stored_bytes(candidate) > self._quota_bytes:
                    raise QuotaExceeded(bucket=PACK_STORAGE_BUCKET)
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


_SNAPSHOT_COLUMNS = (
    "snapshot_id, principal_id, scope_id, as_of, known_as_of, fact_count, source_count,"
    " newest_source_observed_at, oldest_source_observed_at, change_position,"
    " assembler_version, ontology_version, policy_version, embedding_version, index_version,"
    " created_at"
)


class PgSnapshotRecords:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert(self, snapshot: Snapshot, facts: Sequence[FrozenFact]) -> None:
        values = [getattr(snapshot, c.strip()) for c in _SNAPSHOT_COLUMNS.split(",")]
        placeholders = ", ".join(f"${i}" for i in range(1, len(values) + 1))
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                f"INSERT INTO snapshots ({_SNAPSHOT_COLUMNS}) VALUES ({placeholders})", *values
            )
            await conn.executemany(
                "INSERT INTO snapshot_facts (snapshot_id, fact_key, version_id, source_ids)"
                " VALUES ($1, $2, $3, $4)",
                [
                    (snapshot.snapshot_id, f.fact_key, f.version_id, list(f.source_ids))
                    for f in facts
                ],
            )

    async def get(self, snapshot_id: uuid.UUID, principal_id: uuid.UUID) -> Snapshot | None:
        row = await self._pool.fetchrow(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM snapshots"
            " WHERE snapshot_id = $1 AND principal_id = $2",
            snapshot_id,
            principal_id,
        )
        return Snapshot(**dict(row)) if row else None


class PgIdempotencyStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def begin(
        self,
        principal_id: uuid.UUID,
        key: str,
        request_hash: str,
        now: datetime,
        claim_expires_at: datetime,
    ) -> Begun:
        async with self._pool.acquire() as conn, conn.transaction():
            claimed = await conn.fetchval(
                "INSERT INTO idempotency_keys"
                " (principal_id, idempotency_key, request_hash, created_at, expires_at)"
                " VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT (principal_id, idempotency_key) DO UPDATE"
                "   SET request_hash = EXCLUDED.request_hash, completed = false,"
                "       result_json = NULL, created_at = EXCLUDED.created_at,"
                "       expires_at = EXCLUDED.expires_at"
                "   WHERE idempotency_keys.expires_at <= $4"
                " RETURNING true",
                principal_id,
                key,
                request_hash,
                now,
                claim_expires_at,
            )
            if claimed:
                return Begun(KeyState.CLAIMED)
            row = await conn.fetchrow(
                "SELECT request_hash, completed, result_json FROM idempotency_keys"
                " WHERE principal_id = $1 AND idempotency_key = $2",
                principal_id,
                key,
            )
        if row["request_hash"] != request_hash:
            return Begun(KeyState.MISMATCH)
        if row["completed"]:
            return Begun(KeyState.COMPLETED, row["result_json"] or "")
        return Begun(KeyState.IN_PROGRESS)

    async def complete(
        self,
        principal_id: uuid.UUID,
        key: str,
        request_hash: str,
        result_json: str,
        now: datetime,
        expires_at: datetime,
    ) -> None:
        await self._pool.execute(
            "UPDATE idempotency_keys SET completed = true, result_json = $4, expires_at = $5"
            " WHERE principal_id = $1 AND idempotency_key = $2 AND request_hash = $3"
            "   AND NOT completed",
            principal_id,
            key,
            request_hash,
            result_json,
            expires_at,
        )

    async def release(self, principal_id: uuid.UUID, key: str, request_hash: str) -> None:
        await self._pool.execute(
            "DELETE FROM idempotency_keys"
            " WHERE principal_id = $1 AND idempotency_key = $2 AND request_hash = $3"
            "   AND NOT completed",
            principal_id,
            key,
            request_hash,
        )
