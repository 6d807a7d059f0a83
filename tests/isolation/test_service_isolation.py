"""Two principals in two workspaces through the real services and the real gateway: every id
one principal holds (proposal, pack, snapshot, cursors) behaves for the other exactly like a
missing id (same code, same data) and the call has no side effect."""

from __future__ import annotations

import uuid

import asyncpg
from harness import without_ids


def other_key(key: str) -> str:
    """A well-formed fact key that exists nowhere."""
    return key[:-4] + ("0000" if not key.endswith("0000") else "1111")


async def test_foreign_ids_behave_like_missing_ones(stack) -> None:
    alice = await stack.account("alice")
    bob = await stack.account("bob")
    first = await stack.ok(alice, "knowledge_propose", {
        "subject": "ledger-api", "predicate": "deploys_to", "object": "eu-west cluster",
        "task_ref": "t-a"})
    await stack.ok(alice, "knowledge_propose", {
        "subject": "ledger-worker", "predicate": "deploys_to", "object": "eu-north cluster",
        "task_ref": "t-a"})
    key = first["fact"]["fact_key"]
    await stack.wait_indexed()
    pack = await stack.ok(alice, "knowledge_get_context", {
        "query": "ledger-api deploys to", "persist": True})
    pack_id = pack["pack_id"]
    snap = await stack.ok(alice, "knowledge_create_snapshot", {})
    snapshot_id = snap["snapshot_id"]
    report = await stack.ok(alice, "knowledge_proposal_report", {"task_ref": "t-a", "limit": 1})
    report_cursor = report["next_cursor"]
    assert report_cursor
    changes = await stack.ok(alice, "knowledge_get_changes", {"limit": 1})
    change_cursor = changes["next_cursor"]
    assert change_cursor

    conn = await asyncpg.connect(stack.dsn)
    try:
        async def state() -> list:
            return [tuple(r) for r in await conn.fetch(
                "SELECT version_id, state, superseded_at FROM knowledge.facts ORDER BY 1")] + [
                await conn.fetchval("SELECT count(*) FROM knowledge.retrieval_feedback"),
                await conn.fetchval("SELECT count(*) FROM snapshot.context_packs")]

        before = await state()
        missing_uuid = str(uuid.uuid4())
        cases = [
            ("knowledge_retract_proposal", {"fact_key": key}, {"fact_key": other_key(key)}),
            ("knowledge_explain_fact", {"fact_key": key}, {"fact_key": other_key(key)}),
            ("knowledge_get_evidence", {"fact_key": key}, {"fact_key": other_key(key)}),
            ("knowledge_get_fact", {"fact_key": key}, {"fact_key": other_key(key)}),
            ("knowledge_search", {"query": "ledger-api eu-west cluster"},
             {"query": "ledger-api eu-west cluster nowhere"}),
            ("knowledge_get_context_pack", {"pack_id": pack_id}, {"pack_id": missing_uuid}),
            ("knowledge_feedback",
             {"context_pack_id": pack_id, "result_ref": pack_id, "signal": "up"},
             {"context_pack_id": missing_uuid, "result_ref": missing_uuid, "signal": "up"}),
            ("knowledge_get_snapshot", {"snapshot_id": snapshot_id},
             {"snapshot_id": missing_uuid}),
            ("knowledge_get_context", {"query": "ledger-api", "snapshot_id": snapshot_id},
             {"query": "ledger-api", "snapshot_id": missing_uuid}),
        ]
        for tool, foreign, missing in cases:
            got = await stack.call(bob, tool, foreign)
            expected = await stack.call(bob, tool, missing)
            if tool == "knowledge_search":  # nothing found is an answer, not an error
                assert got.data["results"] == expected.data["results"] == [], got
                continue
            assert got.error_code is not None, (tool, got)
            assert (got.error_code, without_ids(got.error_data)) == (
                expected.error_code, without_ids(expected.error_data)), tool
        # Cursors are positions, never handles to another principal's data: bob's page after
        # alice's cursor holds only bob's own rows (none here), exactly as for a missing one.
        got = await stack.call(bob, "knowledge_proposal_report",
                               {"task_ref": "t-a", "limit": 1, "cursor": report_cursor})
        assert got.error_code is None and got.data["attempts"] == [] and got.data["total"] == 0
        got = await stack.call(bob, "knowledge_get_changes", {"limit": 5, "cursor": change_cursor})
        assert got.error_code is None
        assert all(c.get("fact_key") != key for c in got.data["changes"]), got.data
        assert await state() == before
    finally:
        await conn.close()

    # Alice still reads everything that is hers.
    assert (await stack.ok(alice, "knowledge_get_context_pack", {"pack_id": pack_id}))
    assert (await stack.ok(alice, "knowledge_get_snapshot", {"snapshot_id": snapshot_id}))
    assert (await stack.ok(alice, "knowledge_explain_fact", {"fact_key": key}))


async def test_project_selection_through_the_gateway(stack) -> None:
    """project_out_of_scope for another tenant's project (same as a missing one, nothing
    written) and ambiguous_project when a member of two workspaces names none."""
    from isolation_stack import add_member, bearer

    from vera.identity.v1 import identity_pb2

    users = {name: await stack.account(name) for name in ("alice", "bob", "carol")}
    projects = {}
    for name in ("alice", "bob"):
        owner = users[name]
        project = (await stack.identity.EnsureProject(identity_pb2.EnsureProjectRequest(
            principal_id=owner["principal_id"], slug=f"{name}-app"))).project
        ws = (await stack.api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                                   json={"slug": f"{name}-ws"})).json()["workspace_id"]
        assert (await stack.api.post(f"/identity/workspaces/{ws}/projects",
                                     headers=bearer(owner["api_key"]),
                                     json={"project": project.slug})).status_code == 200
        projects[name] = (project, ws)

    conn = await asyncpg.connect(stack.dsn)
    try:
        async def written() -> tuple:
            return (await conn.fetchval("SELECT count(*) FROM snapshot.context_packs"),
                    await conn.fetchval("SELECT count(*) FROM snapshot.snapshots"))

        before = await written()
        bob_project = projects["bob"][0]
        for tool, extra in (("knowledge_get_context", {"query": "x", "persist": True}),
                            ("knowledge_create_snapshot", {})):
            missing = await stack.call(users["alice"], tool,
                                       {**extra, "project": "no-such-project"})
            assert missing.error_code == -32005
            assert missing.error_data["code"] == "project_out_of_scope"
            for reference in (bob_project.slug, bob_project.project_id,
                              users["bob"]["personal_scope_id"]):
                got = await stack.call(users["alice"], tool, {**extra, "project": reference})
                assert got.error_code == -32005, (tool, reference, got)
                assert got.error_data["code"] == "project_out_of_scope"
                assert set(got.error_data) == set(missing.error_data)
        # Alice's own project resolves with no project named (her single shared scope).
        await stack.ok(users["alice"], "knowledge_get_context", {"query": "x"})
        assert await written() == before

        # Carol, a member of both workspaces, must choose.
        for name in ("alice", "bob"):
            await add_member(stack.api, users[name], projects[name][1], users["carol"])
        for tool, extra in (("knowledge_get_context", {"query": "x", "persist": True}),
                            ("knowledge_create_snapshot", {})):
            got = await stack.call(users["carol"], tool, extra)
            assert got.error_code == -32004, (tool, got)
            assert got.error_data["code"] == "ambiguous_project"
        assert await written() == before
        chosen = await stack.ok(users["carol"], "knowledge_get_context",
                                {"query": "x", "project": bob_project.slug})
        assert chosen["request"]["project"]["project_id"] == bob_project.project_id
    finally:
        await conn.close()
