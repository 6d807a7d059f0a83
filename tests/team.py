"""The one home of a team's shared project as tests set it up over REST, the way a team
does: a workspace, the project created by attaching its slug, a member invited and
accepting, the curator's ingest (which maps the team's repository to the project), and
the wait until the ingested fact is cited.

Importable from every test module as ``team`` (``tests/`` is on the path through its
conftest). Used by the deployment loop (``tests/deploy/team_loop.py``) and the real
runtimes' rows (``tests/e2e/test_team_connect.py``).
"""

from __future__ import annotations

import asyncio
import time

import httpx
from mcp import Client

PROJECT = "payments"
# The team's repository: the curator's ingest maps it to the project, so an agent working
# in a clone of it is bootstrapped into the project.
REPOSITORY = "git@github.com:acme/payments.git"
# What the curator ingests; the developer's agent is grounded in it.
SEED_OBJECT, SEED_SOURCE = "PostgreSQL 16", "runbook-1"
SEED = [
    {"type": "source", "id": SEED_SOURCE, "source_type": "runbook", "title": "Deploy runbook"},
    {"type": "fact", "subject": "payments-api", "predicate": "uses_database",
     "object": SEED_OBJECT, "source": SEED_SOURCE, "evidence": "The ledger is PG 16.",
     "repository": REPOSITORY},
]


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def shared_project(api: httpx.AsyncClient, owner: dict, member: dict,
                         slug: str = PROJECT) -> dict:
    """A project ``owner`` curates and ``member`` reads and proposes into, made as a team
    makes it over REST: a workspace, the project created by attaching its slug, the member
    invited and accepting; then the owner ingests the team's knowledge into it.
    ``owner`` and ``member`` are accounts as the API returns them (``principal_id``,
    ``api_key``)."""
    workspace = (await api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                                json={"slug": f"{slug}-team"})).json()["workspace_id"]
    attached = await api.post(f"/identity/workspaces/{workspace}/projects",
                              headers=bearer(owner["api_key"]), json={"project": slug})
    assert attached.status_code == 201, attached.text
    invited = await api.put(f"/identity/workspaces/{workspace}/members/{member['principal_id']}",
                            headers=bearer(owner["api_key"]), json={})
    assert invited.status_code == 202, invited.text
    accepted = await api.post(f"/identity/invitations/{invited.json()['invitation_id']}/accept",
                              headers=bearer(member["api_key"]), json={})
    assert accepted.status_code == 200, accepted.text
    loaded = await api.post(f"/curation/projects/{slug}/ingest",
                            headers=bearer(owner["api_key"]), json={"records": SEED})
    assert loaded.status_code == 200, loaded.text
    return {"project_id": attached.json()["project_id"], "slug": slug,
            "seed_fact_key": loaded.json()["fact_keys"][0]}


async def ingested_fact_cited(client: Client, fact_key: str, project: str = PROJECT,
                              timeout: float = 60.0) -> None:
    """``knowledge_get_context`` cites the curator's ingested fact once it is indexed."""
    give_up = time.monotonic() + timeout
    while True:
        context = await client.call_tool("knowledge_get_context", {
            "query": "which database does payments-api use", "project": project})
        assert not context.is_error, context.content
        found = [r for r in context.structured_content["results"] if r["fact_key"] == fact_key]
        if found:
            assert found[0]["citations"][0]["source_id"] == SEED_SOURCE
            return
        assert time.monotonic() < give_up, context.structured_content
        await asyncio.sleep(0.5)
