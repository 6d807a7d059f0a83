"""A team's loop on an authenticated deployment, every step as its person takes it, and
every command the README's "Set up a team" section shows:

`vera up` with authentication (JWT verification, registration closed) -> the first
administrator (`vera admin create-user --admin`) -> over REST a workspace, a curator, a
developer and a project created through the workspace -> the curator `vera ingest`s as
itself (its API key, never the internal key or the data dir) -> the developer's MCP token
grounds `knowledge_get_context` in the project -> the developer proposes into it -> the
curator lists and verifies it (`vera curate`) -> the developer is served the verified fact.
No step runs in local mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET
from git_fixtures import FixtureRepo
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from team import bearer

from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e

PROJECT = "payments"
REPO = "git@github.com:acme/payments.git"
RECORDS = [
    {"type": "source", "id": "adr-7", "source_type": "adr", "title": "ADR 7: the ledger",
     "uri": "https://git.acme.test/adr/7", "observed_at": "2026-11-20T00:00:00Z"},
    {"type": "fact", "subject": "payments-api", "predicate": "uses_database",
     "object": "PostgreSQL 16", "source": "adr-7", "evidence": "The ledger lives in PG 16.",
     "repository": REPO},
    {"type": "fact", "subject": "payments-api", "predicate": "owned_by",
     "object": "the payments squad", "source": "adr-7", "evidence": "Owners: payments."},
]


@pytest.fixture(scope="module")
def team_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    """A team deployment: authentication on, registration closed (the default)."""
    data_dir = tmp_path_factory.mktemp("team-stack") / "data"
    # The advanced tool profile: the erasure test takes a snapshot after the erasure.
    env = launch_env(data_dir, VERA_MCP__JWT_SECRET=AUTH_SECRET,
                     VERA_MCP__AUTH_ISSUER=AUTH_ISSUER, VERA_MCP__AUTH_AUDIENCE=AUTH_AUDIENCE,
                     VERA_MCP__TOOL_PROFILE="advanced")
    with launch(data_dir, env) as running:
        yield running


def api_url(stack: LaunchedStack) -> str:
    return json.loads((stack.data_dir / "run" / "stack.json").read_text())["api_url"]


def vera_as(stack: LaunchedStack, api_key: str, *args: str, stdin: str | None = None
            ) -> subprocess.CompletedProcess:
    """A `vera` command run by a person holding ``api_key`` (in VERA_API_KEY, as the README
    says; ``stdin`` for --api-key-stdin), pointed at the deployment with --api-url."""
    env = {k: v for k, v in stack.env.items() if k != "VERA_DATA_DIR"}
    if stdin is None:
        env["VERA_API_KEY"] = api_key
    return subprocess.run([sys.executable, "-m", "vera.cli", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=300)


def mcp(stack: LaunchedStack, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


async def call(client: Client, tool: str, **arguments) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


_ADMINISTRATORS: dict[Path, str] = {}


def first_administrator(team_stack: LaunchedStack) -> str:
    """The platform team's first administrator, made once per deployment from the machine
    that runs the stack; their API key."""
    if team_stack.data_dir not in _ADMINISTRATORS:
        created = team_stack.vera("admin", "create-user", "--name", "root", "--admin",
                                  "--data-dir", str(team_stack.data_dir))
        assert created.returncode == 0, created.stderr
        fields = dict(line.split(":", 1) for line in created.stdout.splitlines() if ":" in line)
        _ADMINISTRATORS[team_stack.data_dir] = fields["api_key"].strip()
    return _ADMINISTRATORS[team_stack.data_dir]


def set_up_team(team_stack: LaunchedStack, base: str, workspace_slug: str = "acme",
                project_slug: str = PROJECT) -> tuple[str, str]:
    """The platform team's part; the curator's and the developer's API keys."""
    api = httpx.Client(base_url=base, timeout=60)

    root = first_administrator(team_stack)
    # Nobody registers themselves on a team deployment.
    assert api.post("/identity/register", json={"display_name": "x"}).status_code == 403

    # The administrator: people, a workspace with their roles, and the team's project.
    people = {}
    for name in ("carol", "dev"):
        user = api.post("/identity/users", headers=bearer(root),
                        json={"display_name": f"{name}-{workspace_slug}"})
        assert user.status_code == 201, user.text
        people[name] = user.json()
    workspace = api.post("/identity/workspaces", headers=bearer(root),
                         json={"slug": workspace_slug})
    assert workspace.status_code == 201, workspace.text
    workspace_id = workspace.json()["workspace_id"]
    for name, role in (("carol", "curator"), ("dev", "member")):
        member = api.put(f"/identity/workspaces/{workspace_id}/members/"
                         f"{people[name]['principal_id']}", headers=bearer(root),
                         json={"role": role})
        assert member.status_code == 200, member.text
    project = api.post(f"/identity/workspaces/{workspace_id}/projects", headers=bearer(root),
                       json={"project": project_slug})
    assert project.status_code == 201, project.text
    return people["carol"]["api_key"], people["dev"]["api_key"]


def mcp_token(base: str, api_key: str) -> str:
    exchanged = httpx.post(f"{base}/identity/mcp-token", headers=bearer(api_key),
                           json={"scopes": ["memory:read", "memory:propose"]}, timeout=60)
    assert exchanged.status_code == 200, exchanged.text
    return exchanged.json()["access_token"]


async def test_the_team_loop_on_an_authenticated_deployment(team_stack, tmp_path: Path) -> None:
    base = api_url(team_stack)
    curator, developer = await anyio.to_thread.run_sync(set_up_team, team_stack, base)

    # The curator loads the team's knowledge as itself.
    facts = tmp_path / "payments.jsonl"
    facts.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    loaded = vera_as(team_stack, curator, "ingest", str(facts), "--project", PROJECT,
                     "--api-url", base)
    assert loaded.returncode == 0, loaded.stderr
    assert "2 created, 0 deduplicated" in loaded.stdout
    printed = {int(line.split(":")[0]): line.split(": ")[1].strip()
               for line in loaded.stdout.splitlines() if line.startswith("  ") and
               line.strip().split(":")[0].isdigit()}
    assert sorted(printed) == [2, 3]
    # A developer is not the project's curator: refused, naming the project, nothing written.
    refused = vera_as(team_stack, "", "ingest", str(facts), "--project", PROJECT,
                      "--api-url", base, "--api-key-stdin", stdin=developer + "\n")
    assert refused.returncode == 2
    assert "project payments" in refused.stderr and "unauthorized" in refused.stderr

    # The developer's agent: an MCP token grounds the task in the team's project.
    token = await anyio.to_thread.run_sync(mcp_token, base, developer)
    async with mcp(team_stack, token) as client:
        boot = await call(client, "knowledge_bootstrap", repository=REPO, branch="main")
        assert boot["repository"]["status"] == "selected"
        context = await call(client, "knowledge_get_context", project=PROJECT,
                             query="which database does payments-api use?")
        top = context["results"][0]
        assert (top["object"], top["fact_key"]) == ("PostgreSQL 16", printed[2])
        assert top["citations"][0]["source_id"] == "adr-7"
        proposal = await call(client, "knowledge_propose", subject="payments-api",
                              predicate="retry_policy", object="three times with backoff",
                              evidence_text="seen in handler.py", task_ref="task-7",
                              runtime="claude-code", project=PROJECT)
        assert proposal["outcome"] == "created"
        proposed_key = proposal["fact"]["fact_key"]

    # The curator reviews the queue and verifies.
    curate = ("curate", "--api-url", base, "--json")
    listed = vera_as(team_stack, curator, *curate, "list", PROJECT)
    assert listed.returncode == 0, listed.stderr
    assert [p["fact_key"] for p in json.loads(listed.stdout)["proposals"]] == [proposed_key]
    verified = vera_as(team_stack, curator, *curate, "verify", PROJECT, proposed_key)
    assert verified.returncode == 0, verified.stderr
    verified_key = json.loads(verified.stdout)["fact"]["fact_key"]
    # The developer may not curate.
    assert vera_as(team_stack, developer, *curate, "list", PROJECT).returncode == 2

    # Every agent of the team is served the verified fact.
    async with mcp(team_stack, token) as client:
        with anyio.fail_after(120):
            while True:
                found = await call(client, "knowledge_get_context", project=PROJECT,
                                   query="what is the retry policy of payments-api?")
                served = [r for r in found["results"] if r["fact_key"] == verified_key]
                if served:
                    break
                await anyio.sleep(0.2)
    assert served[0]["object"] == "three times with backoff"
    assert served[0]["citations"][0]["verification"] == "verified"


SECRET_OBJECT = "zanzibar-quokka-cluster"


async def test_an_administrator_erases_personal_knowledge_and_keys_end_over_rest(
        team_stack) -> None:
    """On the same authenticated deployment, over its REST API: a person lists, pages and
    revokes their API keys (a revoked key is refused at once); an administrator erases a
    person's personal knowledge, and what was erased is gone from search, from context and
    from a snapshot taken after it."""
    base = api_url(team_stack)
    api = httpx.AsyncClient(base_url=base, timeout=60)
    root = await anyio.to_thread.run_sync(first_administrator, team_stack)
    erin = (await api.post("/identity/users", headers=bearer(root),
                           json={"display_name": "erin"})).json()

    # Keys: a second one, listed a page at a time, revoked, refused from then on.
    spare = await api.post("/identity/api-keys", headers=bearer(erin["api_key"]),
                           json={"label": "ci"})
    assert spare.status_code == 201, spare.text
    first = (await api.get("/identity/api-keys", params={"page_size": 1},
                           headers=bearer(erin["api_key"]))).json()
    assert len(first["keys"]) == 1 and first["next_page_token"]
    second = (await api.get("/identity/api-keys", headers=bearer(erin["api_key"]), params={
        "page_size": 1, "page_token": first["next_page_token"]})).json()
    listed = {k["key_id"]: k for k in first["keys"] + second["keys"]}
    assert spare.json()["key_id"] in listed and len(listed) == 2
    revoked = await api.delete(f"/identity/api-keys/{spare.json()['key_id']}",
                               headers=bearer(erin["api_key"]))
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    refused = await api.get("/identity/api-keys", headers=bearer(spare.json()["api_key"]))
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthenticated"
    after = (await api.get("/identity/api-keys", headers=bearer(erin["api_key"]))).json()
    assert {k["key_id"]: k["revoked_at"] is not None for k in after["keys"]}[
        spare.json()["key_id"]] is True

    # Personal knowledge: a proposal in erin's own scope, found before the erasure.
    exchanged = await api.post("/identity/mcp-token", headers=bearer(erin["api_key"]), json={
        "scopes": ["memory:read", "memory:propose", "memory:snapshot"]})
    assert exchanged.status_code == 200, exchanged.text
    token = exchanged.json()["access_token"]
    async with mcp(team_stack, token) as client:
        proposed = await call(client, "knowledge_propose", subject="billing-service",
                              predicate="deploys_to", object=SECRET_OBJECT,
                              evidence_text=f"runbook says {SECRET_OBJECT}", task_ref="t-1")
        key = proposed["fact"]["fact_key"]
        with anyio.fail_after(120):
            while True:
                found = await call(client, "knowledge_search", query=SECRET_OBJECT)
                if any(r["fact_key"] == key for r in found["results"]):
                    break
                await anyio.sleep(0.2)

    # Only an administrator erases.
    path = f"/identity/users/{erin['principal_id']}/personal-knowledge"
    denied = await api.delete(path, headers=bearer(erin["api_key"]))
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "unauthorized"
    erased = await api.delete(path, headers=bearer(root))
    assert erased.status_code == 200, erased.text
    assert erased.json()["counts"]["facts"] >= 1

    async with mcp(team_stack, token) as client:
        with anyio.fail_after(120):
            while True:  # retrieval drops erased versions as it follows the change log
                found = await call(client, "knowledge_search", query=SECRET_OBJECT)
                if all(r["fact_key"] != key for r in found["results"]):
                    break
                await anyio.sleep(0.2)
        context = await call(client, "knowledge_get_context",
                             query="where does billing-service deploy?")
        assert all(r["fact_key"] != key for r in context["results"])
        assert SECRET_OBJECT not in json.dumps(context)
        snapshot = await call(client, "knowledge_create_snapshot",
                              project=erin["personal_scope_id"])
        replayed = await call(client, "knowledge_get_context",
                              query="where does billing-service deploy?",
                              snapshot_id=snapshot["snapshot_id"])
        assert SECRET_OBJECT not in json.dumps(replayed)
    await api.aclose()


async def test_a_curator_harvests_a_repository_into_the_team_project(
        team_stack, tmp_path: Path) -> None:
    """`vera harvest` against the deployment over REST with the curator's API key: the
    repository's facts published with their files as sources, a rerun adds nothing, a
    developer may not publish, and an agent bound to the repository is served them."""
    base = api_url(team_stack)
    curator, developer = await anyio.to_thread.run_sync(
        set_up_team, team_stack, base, "harvesters", "shop")
    repo = FixtureRepo(tmp_path / "shop", remote="git@github.com:acme/shop.git")
    repo.commit({"pyproject.toml": '[project]\nname = "shop-api"\ndependencies = [\n'
                                   '  "asyncpg==0.29.0",\n]\n'})
    harvest = ("harvest", str(repo.root), "--project", "shop", "--api-url", base,
               "--data-dir", str(tmp_path / "client"), "--publish", "--json")
    done = await anyio.to_thread.run_sync(lambda: vera_as(team_stack, curator, *harvest))
    assert done.returncode == 0, done.stderr
    (outcome,) = json.loads(done.stdout)["commits"]
    assert outcome["loaded"]["created"] == 2
    again = await anyio.to_thread.run_sync(lambda: vera_as(team_stack, curator, *harvest))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["commits"][0]["loaded"] == {
        "created": 0, "deduplicated": 2, "corrections_applied": 0,
        "corrections_already_recorded": 0}
    refused = await anyio.to_thread.run_sync(
        lambda: vera_as(team_stack, developer, *harvest[:-1], "--data-dir",
                        str(tmp_path / "dev")))
    assert refused.returncode == 2 and "unauthorized" in refused.stderr
    # Without --publish a member files the harvest for the curators' review.
    repo.commit({"compose.yaml": "services:\n  db:\n    image: postgres:16\n"})
    proposing = ("harvest", str(repo.root), "--project", "shop", "--api-url", base,
                 "--data-dir", str(tmp_path / "dev"), "--json")
    proposed = await anyio.to_thread.run_sync(lambda: vera_as(team_stack, developer, *proposing))
    assert proposed.returncode == 0, proposed.stderr
    assert json.loads(proposed.stdout)["commits"][0]["proposed"] == {
        "created": 1, "deduplicated": 2}
    listed = vera_as(team_stack, curator, "curate", "--api-url", base, "--json", "list", "shop")
    assert listed.returncode == 0, listed.stderr
    assert [p["object"] for p in json.loads(listed.stdout)["proposals"]] == ["postgres:16"]

    token = await anyio.to_thread.run_sync(mcp_token, base, developer)
    async with mcp(team_stack, token) as client:
        context = await call(client, "knowledge_get_context", project="shop",
                             query="which database driver does shop-api use?",
                             repository="git@github.com:acme/shop.git")
        top = next(r for r in context["results"] if r["predicate"] == "uses_database_driver")
        assert top["object"] == "asyncpg"
        assert top["citations"][0]["source_id"] == "github.com/acme/shop/pyproject.toml"
        assert top["citations"][0]["locator"] == "L4"
