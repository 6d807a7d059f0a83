"""A persisted context pack, read back from the snapshot service's own table, holds the
canonical repository identity only: no URL credentials, query or fragment, and no local
absolute code path (the real gateway and services; the row is read with SQL)."""

from __future__ import annotations

import asyncpg

TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"


async def test_a_persisted_pack_row_holds_no_credentials_or_local_paths(stack) -> None:
    alice = await stack.account("alice")
    pack = await stack.ok(alice, "knowledge_get_context", {
        "query": "which database does payments use?",
        "persist": True,
        "repository": f"https://ci-bot:{TOKEN}@github.com/Acme/Payments.git?ref=main#L1",
        "code_path": "/home/alice/src/payments/services/ledger",
    })
    read_back = await stack.ok(alice, "knowledge_get_context_pack", {"pack_id": pack["pack_id"]})
    assert read_back["request"]["repository"] == "github.com/Acme/Payments"
    assert read_back["request"]["code_path"] is None
    conn = await asyncpg.connect(stack.dsn)
    try:
        stored = await conn.fetchval(
            "SELECT canonical_request::text || content::text FROM snapshot.context_packs"
            " WHERE pack_id = $1::uuid", pack["pack_id"])
    finally:
        await conn.close()
    assert "github.com/Acme/Payments" in stored
    for leaked in (TOKEN, "ci-bot", "ref=main", "/home/alice"):
        assert leaked not in stored
