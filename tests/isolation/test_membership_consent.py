"""A workspace owner adding someone is only an invitation: through the real services, the
gateway and the REST API, the invitee's calls behave exactly as before (no foreign facts, no
ambiguous_project, no proposals addressed to the inviter) until it accepts; and a proposal
is addressed only to the project its task is bound to, never to every readable project."""

from __future__ import annotations

import asyncpg
from isolation_stack import bearer

from vera.identity.v1 import identity_pb2

REPOSITORY = "https://github.com/acme/payments"
PLANTED = "attacker-owned-bucket"


async def tenant(stack, owner: dict, name: str) -> tuple[identity_pb2.Project, str]:
    """The owner's shared project in its own workspace, mapped to REPOSITORY."""
    project = (await stack.identity.EnsureProject(identity_pb2.EnsureProjectRequest(
        principal_id=owner["principal_id"], slug=f"{name}-app"))).project
    await stack.identity.MapRepository(identity_pb2.MapRepositoryRequest(
        principal_id=owner["principal_id"], project_id=project.project_id,
        repository=REPOSITORY))
    ws = (await stack.api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                               json={"slug": f"{name}-ws"})).json()["workspace_id"]
    attached = await stack.api.post(f"/identity/workspaces/{ws}/projects",
                                    headers=bearer(owner["api_key"]),
                                    json={"project": project.slug})
    assert attached.status_code == 200, attached.text
    return project, ws


async def test_an_invitation_changes_nothing_until_the_invitee_accepts(stack) -> None:
    mallory, victim = await stack.account("mallory"), await stack.account("victim")
    theirs, ws = await tenant(stack, mallory, "mallory")
    own, _ = await tenant(stack, victim, "victim")
    # Shared truth in mallory's project, verified by its owner.
    planted = await stack.ok(mallory, "knowledge_propose", {
        "subject": "payments-api", "predicate": "deploys_to", "object": PLANTED,
        "task_ref": "plant", "project": theirs.slug})
    verified = await stack.api.post(
        f"/curation/projects/{theirs.project_id}/proposals/{planted['fact']['fact_key']}/verify",
        headers=bearer(mallory["api_key"]), json={})
    assert verified.status_code == 200, verified.text

    invited = await stack.api.put(f"/identity/workspaces/{ws}/members/{victim['principal_id']}",
                                  headers=bearer(mallory["api_key"]), json={})
    assert invited.status_code == 202, invited.text
    await stack.wait_indexed()

    conn = await asyncpg.connect(stack.dsn)
    try:
        async def targets(fact_key: str) -> set[str]:
            rows = await conn.fetch(
                "SELECT scope_id FROM knowledge.proposal_targets WHERE fact_key = $1", fact_key)
            return {str(r["scope_id"]) for r in rows}

        async def propose(subject: str, **extra: str) -> str:
            made = await stack.ok(victim, "knowledge_propose", {
                "subject": subject, "predicate": "deploys_to", "object": "eu-west cluster",
                "task_ref": "t-v", **extra})
            assert made["outcome"] == "created", made
            return made["fact"]["fact_key"]

        # Invited, not a member: project-less calls resolve to its own project as before...
        context = await stack.ok(victim, "knowledge_get_context", {"query": "payments-api"})
        assert context["request"]["project"]["project_id"] == own.project_id
        # ...mallory's facts stay out of its searches...
        found = await stack.ok(victim, "knowledge_search", {"query": f"payments-api {PLANTED}"})
        assert all(r["object"] != PLANTED for r in found["results"]), found
        # ...and its proposals for the shared repository go to its own project only.
        assert await targets(await propose("ledger-api", repository_ref=REPOSITORY)) == {
            own.project_id}
        refused = await stack.call(victim, "knowledge_propose", {
            "subject": "x", "predicate": "deploys_to", "object": "y", "project": theirs.slug})
        assert refused.error_data["code"] == "project_out_of_scope"
        # No task binding: personal scope only, no curator sees it.
        assert await targets(await propose("worker")) == set()

        listed = (await stack.api.get("/identity/invitations",
                                      headers=bearer(victim["api_key"]))).json()["invitations"]
        assert [i["workspace"]["workspace_id"] for i in listed] == [ws]
        accepted = await stack.api.post(
            f"/identity/invitations/{listed[0]['invitation_id']}/accept",
            headers=bearer(victim["api_key"]), json={})
        assert accepted.status_code == 200, accepted.text

        # A member now: it reads mallory's project and must choose one by name.
        found = await stack.ok(victim, "knowledge_search", {"query": f"payments-api {PLANTED}"})
        assert any(r["object"] == PLANTED for r in found["results"]), found
        ambiguous = await stack.call(victim, "knowledge_get_context", {"query": "payments-api"})
        assert ambiguous.error_data["code"] == "ambiguous_project"
        # The repository now maps to two readable projects: the task is bound to neither.
        assert await targets(await propose("cache", repository_ref=REPOSITORY)) == set()
        assert await targets(await propose("queue")) == set()
        # Only an explicit choice addresses mallory's project.
        assert await targets(await propose("search", project=theirs.slug)) == {
            theirs.project_id}
    finally:
        await conn.close()
