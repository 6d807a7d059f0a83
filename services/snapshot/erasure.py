"""Erasure of everything a principal persisted here: context packs (with their usage
records, and their bytes given back to the storage counters), snapshots (with their frozen
fact lists) and idempotency keys (their stored results quote tool output).

Snapshots are immutable at the database; only a transaction that sets ``vera.erasure``
may delete them (migration 0003).
"""

from __future__ import annotations

import asyncpg

from vera.db import audit
from vera.request_fields import parse_uuid
from vera.services.snapshot.store import release_pack_bytes

# An erasure of a principal's packs and snapshots, in the audit trail (vera.db.audit).
AUDIT_PACKS_ERASED = "principal_packs.erased"


class PgPrincipalErasure:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def erase(self, principal_id: str) -> dict[str, int]:
        principal = parse_uuid("principal_id", principal_id)
        counts: dict[str, int] = {}
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT set_config('vera.erasure', 'on', true)")
            packs = await conn.fetch(
                "DELETE FROM context_packs WHERE principal_id = $1"
                " RETURNING scope_id, principal_id, stored_bytes",
                principal,
            )
            await release_pack_bytes(conn, packs)
            await conn.execute(
                "DELETE FROM principal_pack_storage WHERE principal_id = $1 AND stored_bytes = 0",
                principal,
            )
            counts["context_packs"] = len(packs)
            for name, sql in (
                (
                    "snapshot_facts",
                    """DELETE FROM snapshot_facts WHERE snapshot_id IN
                       (SELECT snapshot_id FROM snapshots WHERE principal_id = $1)""",
                ),
                ("snapshots", "DELETE FROM snapshots WHERE principal_id = $1"),
                ("idempotency_keys", "DELETE FROM idempotency_keys WHERE principal_id = $1"),
            ):
                counts[name] = int((await conn.execute(sql, principal)).split()[-1])
            # The administrator who asked is named in knowledge's record of the same erasure.
            await audit.append(conn, "-", AUDIT_PACKS_ERASED, {"principal_id": str(principal)})
        return counts
