"""The audit trail's chain (the ``audit_log`` table and functions of each service's
migration ``*_audit_trail.sql``): appending a record, verifying the chain, and its head.

A record is actor, action, target ids and time, nothing else: never a reason, a query, a
token or text a caller wrote. Each record's hash covers the one before, so an altered or
removed record breaks the chain at that record, and the head (count and hash), exported as
a metric and a log line, shows a truncated tail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

VERIFY_PAGE = 1000


@dataclass(frozen=True)
class Head:
    count: int
    hash: str  # hex; "" while the chain is empty


@dataclass(frozen=True)
class Broken:
    seq: int
    reason: str  # missing | altered | relinked


async def append(
    conn: asyncpg.Connection | asyncpg.Pool, actor: str, action: str,
    targets: Mapping[str, Any],
) -> int:
    """Appends one record (in ``conn``'s transaction when it has one); its number."""
    return int(await conn.fetchval(
        "SELECT audit_append($1, $2, $3::jsonb)", actor, action, dict(targets)))


async def head(conn: asyncpg.Connection | asyncpg.Pool) -> Head:
    row = await conn.fetchrow("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
    return Head(0, "") if row is None else Head(int(row["seq"]), bytes(row["hash"]).hex())


async def verify(conn: asyncpg.Connection) -> tuple[Head, Broken | None]:
    """Walks the chain from its first record: the head reached, and the first record that
    is missing (a gap in the numbers), altered (its hash is not its content's) or
    relinked (it does not name the hash of the record before)."""
    expected, previous, after = 1, b"", 0
    while True:
        rows = await conn.fetch(
            """SELECT seq, prev_hash, hash,
                      audit_record_hash(prev_hash, seq, at, actor, action, targets) AS computed
               FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2""",
            after, VERIFY_PAGE)
        for row in rows:
            seq = int(row["seq"])
            if seq != expected:
                return Head(expected - 1, previous.hex()), Broken(expected, "missing")
            if bytes(row["hash"]) != bytes(row["computed"]):
                return Head(expected - 1, previous.hex()), Broken(seq, "altered")
            if bytes(row["prev_hash"]) != previous:
                return Head(expected - 1, previous.hex()), Broken(seq, "relinked")
            expected, previous = seq + 1, bytes(row["hash"])
        if len(rows) < VERIFY_PAGE:
            return Head(expected - 1, previous.hex()), None
        after = expected - 1


class AuditTrail:
    """A service's chain, read a page at a time (ListAuditRecords)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def page(
        self, after: int, limit: int, action: str
    ) -> tuple[list[dict[str, Any]], Head]:
        """Records numbered after ``after`` (of ``action`` only, unless empty), oldest
        first, and the chain's head."""
        async with self._pool.acquire() as conn, conn.transaction(
                isolation="repeatable_read", readonly=True):
            rows = await conn.fetch(
                """SELECT seq, at, actor, action, targets, hash FROM audit_log
                   WHERE seq > $1 AND ($2 = '' OR action = $2) ORDER BY seq LIMIT $3""",
                after, action, limit)
            top = await head(conn)
        return [
            {"seq": int(r["seq"]), "at": r["at"], "actor": r["actor"], "action": r["action"],
             "targets": {k: str(v) for k, v in dict(r["targets"]).items()},
             "hash": bytes(r["hash"]).hex()}
            for r in rows
        ], top
