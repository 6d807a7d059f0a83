"""Erasure end to end: a principal's proposals, feedback and persisted packs are physically
removed from every schema and index by an administrator; what other principals wrote, and
the audit event (ids and counts only), stay."""

from __future__ import annotations

import json
import uuid

import asyncpg
from isolation_stack import add_member, bearer

from vera.identity.v1 import identity_pb2

SECRET_OBJECT = "zanzibar-quokka-cluster"
VERIFIED_OBJECT = "verified-ledger-cluster"


async def count(conn: asyncpg.Connection, sql: str, *args: object) -> int:
    return int(await conn.fetchval(sql, *args))


async def test_admin_erases_personal_knowledge_everywhere(stack) -> None:
    admin = await stack.account("admin", admin=True)
    alice = await stack.account("alice")
    bob = await stack.account("bob")
    carol = await stack.account("carol")  # owns the shared project alice works in
    project = (await stack.identity.EnsureProject(identity_pb2.EnsureProjectRequest(
        principal_id=carol["principal_id"], slug="ledger"))).project
    ws = (await stack.api.post("/identity/workspaces", headers=bearer(carol["api_key"]),
                               json={"slug": "ledger-ws"})).json()["workspace_id"]
    assert (await stack.api.post(f"/identity/workspaces/{ws}/projects",
                                 headers=bearer(carol["api_key"]),
                                 json={"project": project.slug})).status_code == 200
    await add_member(stack.api, carol, ws, alice)

    # A proposal carol verifies into the shared project: shared truth that must survive.
    verified = await stack.ok(alice, "knowledge_propose", {
        "subject": "ledger-api", "predicate": "deploys_to", "object": VERIFIED_OBJECT,
        "task_ref": "t-0", "project": project.slug})
    decided = await stack.api.post(
        f"/curation/projects/{project.project_id}/proposals/"
        f"{verified['fact']['fact_key']}/verify", headers=bearer(carol["api_key"]), json={})
    assert decided.status_code == 200, decided.text

    proposed = await stack.ok(alice, "knowledge_propose", {
        "subject": "billing-service", "predicate": "deploys_to", "object": SECRET_OBJECT,
        "evidence_text": f"runbook says {SECRET_OBJECT}", "task_ref": "t-1",
        "project": project.slug})
    assert proposed["outcome"] == "created"
    alice_key = proposed["fact"]["fact_key"]
    await stack.ok(bob, "knowledge_propose", {
        "subject": "billing-service", "predicate": "deploys_to", "object": "helm charts",
        "task_ref": "t-2"})
    pack = await stack.ok(alice, "knowledge_get_context", {
        "query": f"billing-service deploys to {SECRET_OBJECT}", "persist": True})
    pack_id = pack["pack_id"]
    assert pack_id
    fb = await stack.ok(alice, "knowledge_feedback", {
        "context_pack_id": pack_id, "result_ref": pack_id, "signal": "up"})
    assert fb["created"] is True
    snap = await stack.ok(alice, "knowledge_create_snapshot",
                          {"project": alice["personal_scope_id"]})
    assert snap["snapshot_id"]
    await stack.wait_indexed()

    conn = await asyncpg.connect(stack.dsn)
    try:
        scope = alice["personal_scope_id"]
        assert await count(conn, "SELECT count(*) FROM knowledge.facts WHERE scope_id = $1",
                           scope) > 0
        assert await count(conn, "SELECT count(*) FROM retrieval.documents WHERE scope_id = $1",
                           scope) > 0
        before_bob = await count(conn, "SELECT count(*) FROM knowledge.facts WHERE scope_id = $1",
                                 bob["personal_scope_id"])
        found = await stack.ok(alice, "knowledge_search", {"query": SECRET_OBJECT})
        assert any(r["fact_key"] == alice_key for r in found["results"]), found

        # Only an administrator may erase; a refused call changes nothing.
        refused = await stack.api.delete(
            f"/identity/users/{alice['principal_id']}/personal-knowledge",
            headers=bearer(bob["api_key"]))
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "unauthorized"
        # No credential, or an MCP token instead of an API key: 401; an unknown principal
        # is refused before anything is erased.
        for headers in ({}, bearer(admin["token"])):
            refused = await stack.api.delete(
                f"/identity/users/{alice['principal_id']}/personal-knowledge", headers=headers)
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthenticated"
        unknown = await stack.api.delete(
            f"/identity/users/{uuid.uuid4()}/personal-knowledge", headers=bearer(admin["api_key"]))
        assert unknown.status_code == 400
        assert unknown.json()["error"]["code"] == "invalid_input"
        assert await count(conn, "SELECT count(*) FROM knowledge.facts WHERE scope_id = $1",
                           scope) > 0
        assert await count(conn, "SELECT count(*) FROM knowledge.audit_events") == 0

        erased = await stack.api.delete(
            f"/identity/users/{alice['principal_id']}/personal-knowledge",
            headers=bearer(admin["api_key"]))
        assert erased.status_code == 200, erased.text
        body = erased.json()
        assert body["counts"]["facts"] >= 1
        assert body["counts"]["proposal_attempts"] == 2
        assert body["counts"]["feedback"] == 1
        assert body["counts"]["context_packs"] == 1
        assert body["counts"]["snapshots"] == 1
        await stack.wait_indexed()

        for sql in (
            "SELECT count(*) FROM knowledge.facts WHERE scope_id = $1",
            "SELECT count(*) FROM knowledge.assertions WHERE scope_id = $1",
            "SELECT count(*) FROM knowledge.proposal_attempts WHERE scope_id = $1",
            "SELECT count(*) FROM knowledge.retrieval_feedback WHERE scope_id = $1",
            "SELECT count(*) FROM knowledge.outbox WHERE scope_id = $1 AND kind <> 'fact_erased'",
            "SELECT count(*) FROM knowledge.proposal_targets t JOIN knowledge.facts f"
            " USING (version_id) WHERE f.scope_id = $1",
            "SELECT count(*) FROM retrieval.documents WHERE scope_id = $1",
        ):
            assert await count(conn, sql, scope) == 0, sql
        principal = alice["principal_id"]
        for sql in (
            "SELECT count(*) FROM snapshot.context_packs WHERE principal_id = $1",
            "SELECT count(*) FROM snapshot.snapshots WHERE principal_id = $1",
            "SELECT count(*) FROM snapshot.idempotency_keys WHERE principal_id = $1",
            "SELECT count(*) FROM knowledge.proposal_attempts WHERE principal_id = $1",
            "SELECT count(*) FROM knowledge.retrieval_feedback WHERE principal_id = $1",
        ):
            assert await count(conn, sql, principal) == 0, sql
        # No text of the erased proposal survives anywhere in the database.
        for table in ("knowledge.evidence", "knowledge.facts", "retrieval.documents",
                      "knowledge.audit_events", "snapshot.context_packs"):
            assert await count(
                conn, f"SELECT count(*) FROM {table} t WHERE t::text LIKE $1",
                f"%{SECRET_OBJECT}%") == 0, table

        # The in-process index and the vector index forget it too: search finds nothing.
        found = await stack.ok(alice, "knowledge_search", {"query": SECRET_OBJECT})
        assert all(r["fact_key"] != alice_key for r in found["results"]), found
        # Bob's knowledge is untouched.
        assert await count(conn, "SELECT count(*) FROM knowledge.facts WHERE scope_id = $1",
                           bob["personal_scope_id"]) == before_bob
        report = await stack.ok(bob, "knowledge_proposal_report", {"task_ref": "t-2"})
        assert report["total"] == 1
        # The fact carol verified stays in the shared project, attributed to her.
        shared = await conn.fetch(
            "SELECT created_by, state FROM knowledge.facts WHERE scope_id = $1"
            " AND object = $2 AND superseded_at IS NULL", uuid.UUID(project.project_id),
            VERIFIED_OBJECT)
        assert [(str(r["created_by"]), r["state"]) for r in shared] == [
            (carol["principal_id"], "ACTIVE")]
        assert await count(conn, "SELECT count(*) FROM knowledge.facts WHERE created_by = $1"
                           " OR scope_id = $2", uuid.UUID(principal), uuid.UUID(scope)) == 0
        assert await count(conn, "SELECT count(*) FROM knowledge.assertions"
                           " WHERE asserted_by = $1", uuid.UUID(principal)) == 0
        found = await stack.ok(carol, "knowledge_search", {"query": VERIFIED_OBJECT})
        assert any(r["object"] == VERIFIED_OBJECT for r in found["results"]), found

        # The audit event: who, whom, counts and when; no content.
        event = await conn.fetchrow(
            "SELECT * FROM knowledge.audit_events WHERE action = 'principal_data_erased'")
        assert str(event["actor_id"]) == admin["principal_id"]
        assert event["target"] == principal
        assert str(event["event_id"]) == body["audit_event_id"]
        assert event["created_at"] is not None
        details = json.loads(event["details"])
        assert details["counts"]["facts"] == body["counts"]["facts"]
        assert details["related_counts"]["context_packs"] == 1
        assert SECRET_OBJECT not in json.dumps(details) and event["reason"] == ""

        # Erasing again is harmless and finds nothing left.
        again = await stack.api.delete(f"/identity/users/{principal}/personal-knowledge",
                                       headers=bearer(admin["api_key"]))
        assert again.status_code == 200
        assert again.json()["counts"]["facts"] == 0
    finally:
        await conn.close()
