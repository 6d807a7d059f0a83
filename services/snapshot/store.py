"""asyncpg implementation of the snapshot store (schema ``snapshot``)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import defaultdict
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
    """What a pack costs against the storage quotas: its stored JSON. Kept on the row, so
    whatever deletes the pack gives back exactly what its insert charged."""
    return len(json.dumps(pack.canonical_request).encode()) + len(json.dumps(pack.content).encode())


async def _charge(
    conn: asyncpg.Connection, table: str, column: str, owner: uuid.UUID, size: int, quota: int
) -> bool:
    """Adds ``size`` to one running counter unless that would pass ``quota``. The row lock
    lasts only to the end of the pack's insert transaction, so concurrent persists queue
    on it briefly and never overshoot."""
    if size > quota:
        return False
    charged = await conn.fetchval(
        f"INSERT INTO {table} AS t ({column}, stored_bytes) VALUES ($1, $2)"
        f" ON CONFLICT ({column}) DO UPDATE SET stored_bytes = t.stored_bytes + $2"
        "   WHERE t.stored_bytes + $2 <= $3"
        " RETURNING true",
        owner,
        size,
        quota,
    )
    return bool(charged)


async def release_pack_bytes(conn: asyncpg.Connection, deleted: Sequence[asyncpg.Record]) -> None:
    """Gives back what deleted packs (rows with scope_id, principal_id, stored_bytes) held,
    in the transaction that deleted them. Counters are locked scope rows first, then
    principal rows, each in id order, the order a pack insert takes them, so a sweep, an
    erasure and concurrent inserts never deadlock."""
    by_scope: dict[uuid.UUID, int] = defaultdict(int)
    by_principal: dict[uuid.UUID, int] = defaultdict(int)
    for row in deleted:
        by_scope[row["scope_id"]] += row["stored_bytes"]
        by_principal[row["principal_id"]] += row["stored_bytes"]
    for table, column, amounts in (
        ("scope_pack_storage", "scope_id", by_scope),
        ("principal_pack_storage", "principal_id", by_principal),
    ):
        if amounts:
            await conn.executemany(
                f"UPDATE {table} SET stored_bytes = stored_bytes - $2 WHERE {column} = $1",
                sorted(amounts.items()),
            )


async def sweep_expired(
    pool: asyncpg.Pool,
    now: datetime,
    *,
    scope_id: uuid.UUID | None = None,
    principal_id: uuid.UUID | None = None,
) -> int:
    """Physically deletes every pack expired at ``now`` (only those of ``scope_id`` or
    ``principal_id`` when either is given), in bounded batches, giving their bytes back to
    the quota counters, and every lapsed idempotency key; returns how many packs."""
    owned = scope_id is not None or principal_id is not None
    if not owned:
        await pool.execute("DELETE FROM idempotency_keys WHERE expires_at <= $1", now)
    owner_filter = " AND (scope_id = $3 OR principal_id = $4)" if owned else ""
    owner_args = (scope_id, principal_id) if owned else ()
    deleted = 0
    while True:
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "DELETE FROM context_packs WHERE pack_id IN ("
                f"  SELECT pack_id FROM context_packs WHERE expires_at <= $1{owner_filter}"
                "  LIMIT $2 FOR UPDATE SKIP LOCKED)"
                " RETURNING scope_id, principal_id, stored_bytes",
                now,
                SWEEP_BATCH,
                *owner_args,
            )
            await release_pack_bytes(conn, rows)
        deleted += len(rows)
        if len(rows) < SWEEP_BATCH:
            return deleted


class PgSnapshotStore:
    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        quota_bytes_per_scope: int,
        quota_bytes_per_principal: int,
    ) -> None:
        self._pool = pool
        self._scope_quota = quota_bytes_per_scope
        self._principal_quota = quota_bytes_per_principal

    async def insert_deduplicated(
        self, candidate: ContextPack, now: datetime, usage_ref: str = ""
    ) -> tuple[ContextPack, bool]:
        try:
            return await self._insert(candidate, now, usage_ref)
        except QuotaExceeded:
            # Expired packs hold their bytes until swept; reclaim this scope's and this
            # principal's before refusing, so only live packs count.
            reclaimed = await sweep_expired(
                self._pool, now, scope_id=candidate.scope_id, principal_id=candidate.principal_id
            )
            if not reclaimed:
                raise
        return await self._insert(candidate, now, usage_ref)

    async def _insert(
        self, candidate: ContextPack, now: datetime, usage_ref: str
    ) -> tuple[ContextPack, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            # Serializes creates of one pack identity only: a retry storm stores one pack,
            # while different packs of the same scope or principal do not wait on each other
            # beyond the counter updates.
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1)",
                _lock_key(
                    "pack",
                    str(candidate.principal_id),
                    str(candidate.scope_id),
                    candidate.request_hash,
                    candidate.content_hash,
                    candidate.assembler_version,
                ),
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
                pack, deduplicated = _pack(existing), True
            else:
                size = _stored_bytes(candidate)
                row = await conn.fetchrow(
                    f"INSERT INTO context_packs ({_COLUMNS}, stored_bytes)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
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
                    size,
                )
                # Scope before principal: the lock order release_pack_bytes keeps too.
                for table, column, owner, quota in (
                    ("scope_pack_storage", "scope_id", candidate.scope_id, self._scope_quota),
                    (
                        "principal_pack_storage",
                        "principal_id",
                        candidate.principal_id,
                        self._principal_quota,
                    ),
                ):
                    if not await _charge(conn, table, column, owner, size, quota):
                        raise QuotaExceeded(bucket=PACK_STORAGE_BUCKET)
                pack, deduplicated = _pack(row), False
            if usage_ref:
                await conn.execute(
                    "INSERT INTO context_pack_usage (pack_id, usage_ref, recorded_at)"
                    " VALUES ($1, $2, $3)",
                    pack.pack_id,
                    usage_ref,
                    now,
                )
        return pack, deduplicated

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
