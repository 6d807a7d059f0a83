"""The audit trail's hash chain (vera.db.audit, each service's *_audit_trail migration):
records append in order, the table refuses changes, and a record altered, removed or
relinked in the database, or a truncated tail, is named by `vera audit verify`."""

from __future__ import annotations

import asyncpg
import pytest

from vera.commands.audit import _verify_all
from vera.config import Settings
from vera.db import audit
from vera.db.pool import open_service_database


@pytest.fixture
async def chain(pg_dsn):
    """identity's schema (its migrations applied) with three records."""
    pool = await open_service_database(
        Settings(database={"dsn": pg_dsn}), "identity", "vera.services.identity")
    try:
        for n in range(3):
            await audit.append(pool, f"actor-{n}", "api_key.minted", {"key_id": f"k{n}"})
        yield pool
    finally:
        await pool.close()


async def tamper(dsn: str, sql: str) -> None:
    """What a database administrator could do: bypass the table's triggers."""
    conn = await asyncpg.connect(dsn, server_settings={"search_path": "identity"})
    try:
        await conn.execute("SET session_replication_role = replica")
        await conn.execute(sql)
    finally:
        await conn.close()


async def verified(pool) -> tuple[audit.Head, audit.Broken | None]:
    async with pool.acquire() as conn:
        return await audit.verify(conn)


async def test_an_intact_chain_verifies_to_its_head(chain):
    head, broken = await verified(chain)
    assert broken is None
    assert head == await audit.head(chain) and head.count == 3
    rows = await chain.fetch("SELECT seq, prev_hash, hash FROM audit_log ORDER BY seq")
    assert [r["seq"] for r in rows] == [1, 2, 3]
    assert bytes(rows[0]["prev_hash"]) == b"" and bytes(rows[2]["prev_hash"]) == bytes(
        rows[1]["hash"])


async def test_the_table_refuses_updates_deletes_and_truncation(chain):
    for sql in ("UPDATE audit_log SET actor = 'x' WHERE seq = 2",
                "DELETE FROM audit_log WHERE seq = 2", "TRUNCATE audit_log"):
        with pytest.raises(asyncpg.RaiseError):
            await chain.execute(sql)
    assert (await audit.head(chain)).count == 3


@pytest.mark.parametrize(("sql", "seq", "reason"), [
    ("UPDATE audit_log SET actor = 'someone-else' WHERE seq = 2", 2, "altered"),
    ("UPDATE audit_log SET targets = '{\"key_id\": \"k9\"}' WHERE seq = 3", 3, "altered"),
    ("DELETE FROM audit_log WHERE seq = 2", 2, "missing"),
    ("DELETE FROM audit_log WHERE seq = 1", 1, "missing"),
    ("UPDATE audit_log SET prev_hash = '\\x00', hash = audit_record_hash("
     "'\\x00', seq, at, actor, action, targets) WHERE seq = 2", 2, "relinked"),
])
async def test_a_record_changed_in_the_database_is_named(chain, pg_dsn, sql, seq, reason):
    await tamper(pg_dsn, sql)
    _, broken = await verified(chain)
    assert broken == audit.Broken(seq, reason)


async def test_verify_names_the_broken_record_and_a_truncated_tail(chain, pg_dsn, capsys):
    for service in ("knowledge", "snapshot"):
        await (await open_service_database(
            Settings(database={"dsn": pg_dsn}), service, f"vera.services.{service}")).close()
    head = await audit.head(chain)
    expect = {"identity": (head.count, head.hash)}
    assert await _verify_all(pg_dsn, expect) == 0
    assert "identity: 3 records, chain intact" in capsys.readouterr().out
    await tamper(pg_dsn, "DELETE FROM audit_log WHERE seq = 3")  # the tail, cut cleanly
    assert await _verify_all(pg_dsn, expect) == 1
    assert "identity: BROKEN at record 3 (truncated)" in capsys.readouterr().out
    await tamper(pg_dsn, "UPDATE audit_log SET action = 'x' WHERE seq = 1")
    assert await _verify_all(pg_dsn, {}) == 1
    assert "identity: BROKEN at record 1 (altered)" in capsys.readouterr().out
