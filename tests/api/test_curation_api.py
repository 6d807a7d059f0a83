"""Curation over the REST API: real identity and knowledge services, API-key callers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
from harness import serve_service

from vera.api.app import build_app
from vera.config import Settings
from vera.identity.v1 import identity_pb2 as ipb
from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.knowledge.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
from vera.rpc.client import open_channel
from vera.services.identity import server as identity_server
from vera.services.knowledge import server as knowledge_server

SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"


@dataclass
class User:
    principal_id: str
    personal_scope_id: str
    api_key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


@dataclass
class World:
    api: httpx.AsyncClient
    knowledge: KnowledgeServiceStub
    owner: User
    curator: User
    member: User
    outsider: User
    project_id: str
    workspace_id: str
    identity: IdentityServiceStub


async def _user(identity: IdentityServiceStub, name: str) -> User:
    principal = (await identity.CreateUser(ipb.CreateUserRequest(display_name=name))).principal
    key = await identity.CreateApiKey(
        ipb.CreateApiKeyRequest(principal_id=principal.principal_id, label="t"))
    return User(principal.principal_id, principal.personal_scope_id, key.api_key)


@pytest.fixture
async def world(pg_dsn: str) -> AsyncIterator[World]:
    settings = Settings(database={"dsn": pg_dsn})
    async with (
        serve_service(identity_server, settings) as identity_addr,
        serve_service(knowledge_server, settings) as knowledge_addr,
    ):
        channels = [open_channel(identity_addr, 10.0), open_channel(knowledge_addr, 10.0)]
        identity, knowledge = IdentityServiceStub(channels[0]), KnowledgeServiceStub(channels[1])
        try:
            owner, curator, member, outsider = [
                await _user(identity, n) for n in ("owner", "curator", "member", "outsider")]
            project = (await identity.EnsureProject(
                ipb.EnsureProjectRequest(principal_id=owner.principal_id, slug="payments"))).project
            workspace = (await identity.CreateWorkspace(ipb.CreateWorkspaceRequest(
                actor_principal_id=owner.principal_id, slug="acme"))).workspace
            await identity.AttachProject(ipb.AttachProjectRequest(
                actor_principal_id=owner.principal_id, workspace_id=workspace.workspace_id,
                project=project.project_id))
            for user, role in ((curator, ipb.WORKSPACE_ROLE_CURATOR),
                               (member, ipb.WORKSPACE_ROLE_MEMBER)):
                # The owner invites; membership starts when the invitee accepts.
                invited = await identity.SetWorkspaceMember(ipb.SetWorkspaceMemberRequest(
                    actor_principal_id=owner.principal_id, workspace_id=workspace.workspace_id,
                    principal_id=user.principal_id, role=role))
                await identity.AcceptInvitation(ipb.AcceptInvitationRequest(
                    actor_principal_id=user.principal_id,
                    invitation_id=invited.invitation.invitation_id))
            api_settings = Settings(
                environment="dev", mcp={"jwt_secret": SECRET},
                services={"identity": identity_addr, "knowledge": knowledge_addr})
            app = build_app(api_settings)
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport,
                                             base_url="http://127.0.0.1:8081") as client:
                    yield World(client, knowledge, owner, curator, member, outsider,
                                project.project_id, workspace.workspace_id, identity)
        finally:
            for channel in channels:
                await channel.close()


async def _propose(world: World, subject: str = "payments-api") -> str:
    reply = await world.knowledge.ProposeFact(kpb.ProposeFactRequest(
        principal_id=world.member.principal_id,
        personal_scope_id=world.member.personal_scope_id,
        readable_scope_ids=[world.member.personal_scope_id, world.project_id],
        target_scope_id=world.project_id,
        subject=subject, predicate="depends_on", object="ledger",
        evidence_text="seen in handler.py",
        context=kpb.TaskContext(runtime="claude-code", task_ref="t-1",
                                repository_ref="https://github.com/acme/payments.git"),
        branch="feature/ledger", code_path="services/payments/handler.py"))
    return reply.fact.fact_key


async def test_curator_lists_verifies_and_rejects(world: World) -> None:
    first, second = await _propose(world, "a"), await _propose(world, "b")
    listed = await world.api.get("/curation/projects/payments/proposals?page_size=1",
                                 headers=world.curator.auth)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert (body["total"], body["total_is_lower_bound"]) == (2, False)
    assert [p["fact_key"] for p in body["proposals"]] == [first]
    assert body["proposals"][0]["proposer_principal_id"] == world.member.principal_id
    listed_first = body["proposals"][0]
    assert (listed_first["context"]["runtime"], listed_first["context"]["repository_ref"],
            listed_first["branch"], listed_first["code_path"]) == (
        "claude-code", "github.com/acme/payments", "feature/ledger",
        "services/payments/handler.py")
    nxt = await world.api.get(
        f"/curation/projects/{world.project_id}/proposals",
        params={"page_token": body["next_page_token"]}, headers=world.curator.auth)
    assert [p["fact_key"] for p in nxt.json()["proposals"]] == [second]

    verified = await world.api.post(f"/curation/projects/payments/proposals/{first}/verify",
                                    json={"trust_tier": 0, "note": "ok"},
                                    headers=world.curator.auth)
    assert verified.status_code == 200, verified.text
    data = verified.json()
    assert data["fact"]["state"] == "FACT_STATE_ACTIVE"
    assert data["fact"]["scope_id"] == world.project_id
    assert data["proposal"]["state"] == "FACT_STATE_SUPERSEDED"

    rejected = await world.api.post(f"/curation/projects/payments/proposals/{second}/reject",
                                    json={"reason": "not durable"}, headers=world.owner.auth)
    assert rejected.status_code == 200
    assert rejected.json()["proposal"]["state"] == "FACT_STATE_RETRACTED"
    again = await world.api.post(f"/curation/projects/payments/proposals/{second}/reject",
                                 json={"reason": "x"}, headers=world.owner.auth)
    assert again.status_code == 400
    assert again.json()["error"]["code"] == "invalid_input"
    assert again.json()["error"]["field"] == "fact_key"


async def test_the_change_listing_names_who_changed_what(world: World) -> None:
    key = await _propose(world)
    await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
        principal_id=world.owner.principal_id, scope_id=world.project_id,
        facts=[kpb.FactInput(subject="payments-api", predicate="uses", object="kafka")]))
    verified = await world.api.post(f"/curation/projects/payments/proposals/{key}/verify",
                                    json={}, headers=world.curator.auth)
    assert verified.status_code == 200
    listed = await world.api.get("/curation/projects/payments/changes",
                                 params={"page_size": 1}, headers=world.curator.auth)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    [newest] = body["changes"]
    assert (newest["change"], newest["fact"]["object"]) == ("published", "ledger")
    assert newest["actor"] == {"principal_id": world.curator.principal_id,
                               "display_name": "curator",
                               "handle": world.curator.principal_id.replace("-", "")[:8]}
    older = await world.api.get("/curation/projects/payments/changes",
                                params={"page_token": body["next_page_token"]},
                                headers=world.curator.auth)
    assert [(c["fact"]["object"], c["actor"]["display_name"])
            for c in older.json()["changes"]] == [("kafka", "owner")]
    assert older.json()["next_page_token"] is None
    # Only the project's curators read it.
    refused = await world.api.get("/curation/projects/payments/changes",
                                  headers=world.member.auth)
    assert refused.status_code == 403
    outside = await world.api.get("/curation/projects/payments/changes",
                                  headers=world.outsider.auth)
    assert outside.status_code == 404


async def test_owner_retracts_a_source(world: World) -> None:
    await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
        principal_id=world.owner.principal_id, scope_id=world.project_id,
        sources=[kpb.SourceInput(source_id="adr-7")],
        facts=[kpb.FactInput(subject="s", predicate="uses", object="o", source_id="adr-7")]))
    url = "/curation/projects/payments/sources/adr-7/retract"
    missing = await world.api.post(url, json={}, headers=world.owner.auth)
    assert missing.status_code == 400 and missing.json()["error"]["field"] == "reason"
    done = await world.api.post(url, json={"reason": "wrong"}, headers=world.owner.auth)
    assert done.status_code == 200
    result = done.json()
    assert result["status"] == "retracted" and len(result["retracted_fact_keys"]) == 1
    assert result["audit_event_id"]
    again = await world.api.post(url, json={"reason": "wrong"}, headers=world.curator.auth)
    assert again.json()["status"] == "already_retracted"


async def test_only_owners_and_curators_may_curate(world: World) -> None:
    key = await _propose(world)
    verify = f"/curation/projects/payments/proposals/{key}/verify"
    as_member = await world.api.post(verify, json={}, headers=world.member.auth)
    assert as_member.status_code == 403
    assert as_member.json()["error"]["code"] == "unauthorized"
    as_outsider = await world.api.get("/curation/projects/payments/proposals",
                                      headers=world.outsider.auth)
    assert as_outsider.status_code == 404
    assert as_outsider.json()["error"]["code"] == "project_out_of_scope"
    personal = await world.api.get(
        f"/curation/projects/{world.member.personal_scope_id}/proposals",
        headers=world.member.auth)
    assert personal.status_code == 400 and personal.json()["error"]["field"] == "project"
    # No credential, or a credential that is not an API key (an agent's MCP token): 401.
    for headers in ({}, {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}):
        response = await world.api.get("/curation/projects/payments/proposals", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthenticated"
    # Nothing was decided.
    listed = await world.api.get("/curation/projects/payments/proposals",
                                 headers=world.owner.auth)
    assert listed.json()["total"] == 1


async def test_bad_bodies_are_invalid_input(world: World) -> None:
    key = await _propose(world)
    url = f"/curation/projects/payments/proposals/{key}/verify"
    for body, field in (({"trust_tier": "1"}, "trust_tier"), ({"trust_tier": 4}, "trust_tier"),
                        ({"bogus": 1}, "bogus"), ({"authority": 2}, "authority")):
        response = await world.api.post(url, json=body, headers=world.curator.auth)
        assert response.status_code == 400, body
        assert response.json()["error"]["field"] == field
    bad = await world.api.post(url, content=b"[1]",
                               headers={**world.curator.auth, "content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "body"


async def test_curators_see_conflicted_attempts_with_the_fact_they_contradict(
    world: World,
) -> None:
    await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
        principal_id=world.owner.principal_id, scope_id=world.project_id,
        facts=[kpb.FactInput(subject="payments-api", predicate="uses_database",
                             object="PostgreSQL 14")]))
    contradicted = (await world.knowledge.GetEntity(kpb.GetEntityRequest(
        scope_ids=[world.project_id], name="payments-api"))).facts[0].fact_key
    for version in ("PostgreSQL 15", "PostgreSQL 16"):
        reply = await world.knowledge.ProposeFact(kpb.ProposeFactRequest(
            principal_id=world.member.principal_id,
            personal_scope_id=world.member.personal_scope_id,
            readable_scope_ids=[world.member.personal_scope_id, world.project_id],
            subject="payments-api", predicate="uses_database", object=version,
            context=kpb.TaskContext(runtime="claude-code", task_ref="t-db")))
        assert reply.outcome == kpb.PROPOSAL_OUTCOME_CONFLICTED  # refused, as before

    listed = await world.api.get("/curation/projects/payments/conflicted-attempts",
                                 params={"page_size": 1}, headers=world.curator.auth)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert (body["total"], body["total_is_lower_bound"]) == (2, False)
    newest = body["attempts"][0]
    assert (newest["object"], newest["contradicted_fact_keys"]) == ("PostgreSQL 16",
                                                                     [contradicted])
    assert newest["proposer_principal_id"] == world.member.principal_id
    assert newest["context"]["task_ref"] == "t-db"
    older = await world.api.get("/curation/projects/payments/conflicted-attempts",
                                params={"page_token": body["next_page_token"]},
                                headers=world.curator.auth)
    assert [a["object"] for a in older.json()["attempts"]] == ["PostgreSQL 15"]
    assert older.json()["next_page_token"] is None
    # Curating a project is needed to see them, as for pending proposals.
    refused = await world.api.get("/curation/projects/payments/conflicted-attempts",
                                  headers=world.member.auth)
    assert refused.status_code == 403


def _records(*objects: str) -> list[dict]:
    return [{"type": "source", "id": "adr-7", "title": "ADR 7"},
            *({"type": "fact", "subject": "payments-api", "predicate": "depends_on",
               "object": o, "source": "adr-7", "evidence": "x" * 8000} for o in objects)]


async def test_a_workspace_owner_creates_a_project_through_its_workspace(world: World) -> None:
    url = f"/identity/workspaces/{world.workspace_id}/projects"
    created = await world.api.post(url, json={"project": "billing"}, headers=world.owner.auth)
    assert created.status_code == 201, created.text
    assert created.json()["slug"] == "billing"
    assert created.json()["workspace_id"] == world.workspace_id
    again = await world.api.post(url, json={"project": "billing"}, headers=world.owner.auth)
    assert again.status_code == 200
    assert again.json()["project_id"] == created.json()["project_id"]
    # A member cannot; the workspace's curator curates what its owner created.
    refused = await world.api.post(url, json={"project": "ops"}, headers=world.member.auth)
    assert refused.status_code == 403
    listed = await world.api.get("/curation/projects/billing/proposals",
                                 headers=world.curator.auth)
    assert listed.status_code == 200 and listed.json()["total"] == 0


async def test_a_curator_ingests_and_others_are_refused_naming_the_project(world: World) -> None:
    url = "/curation/projects/payments/ingest"
    # Three facts of 8,000-character evidence: past the 16 KiB every other route allows.
    loaded = await world.api.post(url, json={"records": _records("ledger", "kafka", "redis")},
                                  headers=world.curator.auth)
    assert loaded.status_code == 200, loaded.text
    body = loaded.json()
    assert (body["project_slug"], body["facts"], body["sources"]["created"]) == (
        "payments", {"created": 3, "deduplicated": 0}, 1)
    assert len(body["fact_keys"]) == 3 and body["change_position"] > 0
    source = await world.api.get("/curation/projects/payments/sources/adr-7",
                                 headers=world.curator.auth)
    assert source.status_code == 200 and source.json()["source"]["source_id"] == "adr-7"
    unknown = await world.api.get("/curation/projects/payments/sources/adr-404",
                                  headers=world.curator.auth)
    assert unknown.status_code in (400, 404)
    assert unknown.json()["error"]["code"] in ("invalid_input", "not_found")

    as_member = await world.api.post(url, json={"records": _records("x")},
                                     headers=world.member.auth)
    assert as_member.status_code == 403
    assert as_member.json()["error"] == {**as_member.json()["error"], "code": "unauthorized",
                                         "required_role": "curator"}
    as_outsider = await world.api.post(url, json={"records": _records("x")},
                                       headers=world.outsider.auth)
    assert as_outsider.status_code == 404
    assert as_outsider.json()["error"]["code"] == "project_out_of_scope"
    # Only an administrator's ingest creates a missing project.
    missing = await world.api.post("/curation/projects/ops/ingest",
                                   json={"records": _records("x")}, headers=world.owner.auth)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "project_out_of_scope"


async def test_ingest_refuses_a_bad_record_naming_it_and_writes_nothing(world: World) -> None:
    records = _records("ledger")
    records.append({"type": "fact", "subject": "a", "predicate": "b", "object": "c",
                    "trust_tier": 9})
    refused = await world.api.post("/curation/projects/payments/ingest",
                                   json={"records": records}, headers=world.curator.auth)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["field"], error["reason"]) == (
        "invalid_input", "records[2].trust_tier", "out_of_range")
    for body, field in (({"records": []}, "records"), ({"rows": []}, "rows"),
                        ({"records": [{}] * 2001}, "records")):
        response = await world.api.post("/curation/projects/payments/ingest", json=body,
                                        headers=world.curator.auth)
        assert response.status_code == 400 and response.json()["error"]["field"] == field
    source = await world.api.get("/curation/projects/payments/sources/adr-7",
                                 headers=world.curator.auth)
    assert source.status_code != 200  # the valid records before the bad one were not written


async def test_an_ingest_body_has_its_own_limit(world: World) -> None:
    big = {"records": _records(*(f"dep-{i}" for i in range(300)))}  # ~2.4 MB
    response = await world.api.post("/curation/projects/payments/ingest", json=big,
                                    headers=world.curator.auth)
    assert response.status_code == 413
    assert response.json()["error"]["field"] == "body"


async def test_a_refused_ingest_writes_nothing_not_even_its_repository_mappings(
        world: World, pg_dsn: str) -> None:
    """issue 39 item 12: every record, cited source and correction target is checked before
    the first write (the repository mappings, then the facts in calls of 500)."""

    async def stored() -> tuple[int, ...]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return tuple([await conn.fetchval(f"SELECT count(*) FROM {table}") for table in (
                "identity.repository_mappings", "knowledge.facts", "knowledge.sources",
                "knowledge.entities")])
        finally:
            await conn.close()

    mapped = [{"type": "source", "id": "adr-7"}, {"type": "entity", "name": "ledger"},
              {"type": "fact", "subject": "ledger", "predicate": "depends_on",
               "object": "kafka", "source": "adr-7", "repository": "github.com/acme/ledger"}]
    many = [{"type": "fact", "subject": "ledger", "predicate": "depends_on",
             "object": f"queue-{i}"} for i in range(600)]
    unknown_source = {"type": "fact", "subject": "ledger", "predicate": "depends_on",
                      "object": "redis", "source": "adr-404"}
    unknown_target = {"type": "correction", "corrects": "no-such-fact-key",
                      "subject": "ledger", "predicate": "depends_on", "object": "pulsar"}
    before = await stored()
    for records, line in (([*mapped, unknown_source], 3),
                          ([*mapped, *many, unknown_source], 603),
                          ([*mapped, *many, unknown_target], 603)):
        refused = await world.api.post("/curation/projects/payments/ingest",
                                       json={"records": records}, headers=world.curator.auth)
        assert refused.status_code == 400, refused.text
        assert await stored() == before
        error = refused.json()["error"]
        assert (error["code"], error["field"], error["index"]) == (
            "invalid_input", f"records[{line}]", str(line))
    loaded = await world.api.post("/curation/projects/payments/ingest",
                                  json={"records": [*mapped, *many]},
                                  headers=world.curator.auth)
    assert loaded.status_code == 200, loaded.text
    assert (await stored())[:2] == (before[0] + 1, before[1] + 601)


async def test_two_principals_of_one_name_are_told_apart_in_the_change_feed(
        world: World) -> None:
    """issue 39 item 11: display names are not unique, so the feed shows each actor's
    stable handle beside it; two actors named alike get different handles."""
    twin = await _user(world.identity, "owner")  # the project owner's own display name
    for principal in (world.owner.principal_id, twin.principal_id):
        await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
            principal_id=principal, scope_id=world.project_id,
            facts=[kpb.FactInput(subject="payments-api", predicate="uses",
                                 object=f"queue-{principal}")]))
    listed = await world.api.get("/curation/projects/payments/changes",
                                 headers=world.curator.auth)
    actors = {(c["actor"]["principal_id"], c["actor"]["display_name"], c["actor"]["handle"])
              for c in listed.json()["changes"]}
    assert actors == {(p, "owner", p.replace("-", "")[:8])
                      for p in (world.owner.principal_id, twin.principal_id)}
    assert len({handle for _, _, handle in actors}) == 2


async def test_two_person_verification_over_rest(world: World) -> None:
    """issue 39 item 16: off by default; the project's owner switches it on (a curator may
    not); then the curator who proposed (an agent acting as them) cannot verify it, another
    curator can, and the curator's own ingest stays possible."""
    settings = "/curation/projects/payments/settings"
    read = await world.api.get(settings, headers=world.curator.auth)
    assert read.status_code == 200
    assert read.json() == {"project_id": world.project_id, "two_person_verification": False}
    # Off: a curator verifies what they proposed themselves.
    own = (await world.knowledge.ProposeFact(kpb.ProposeFactRequest(
        principal_id=world.curator.principal_id,
        personal_scope_id=world.curator.personal_scope_id,
        readable_scope_ids=[world.curator.personal_scope_id, world.project_id],
        target_scope_id=world.project_id, subject="ledger", predicate="depends_on",
        object="kafka", evidence_text="seen"))).fact.fact_key
    verified = await world.api.post(f"/curation/projects/payments/proposals/{own}/verify",
                                    json={}, headers=world.curator.auth)
    assert verified.status_code == 200

    by_curator = await world.api.put(settings, json={"two_person_verification": True},
                                     headers=world.curator.auth)
    assert by_curator.status_code == 403
    assert (by_curator.json()["error"]["code"],
            by_curator.json()["error"]["required_role"]) == ("unauthorized", "owner")
    by_member = await world.api.put(settings, json={"two_person_verification": True},
                                    headers=world.member.auth)
    assert by_member.status_code == 403
    switched = await world.api.put(settings, json={"two_person_verification": True},
                                   headers=world.owner.auth)
    assert switched.status_code == 200 and switched.json()["two_person_verification"] is True
    assert (await world.api.get(settings, headers=world.curator.auth)).json()[
        "two_person_verification"] is True

    second = (await world.knowledge.ProposeFact(kpb.ProposeFactRequest(
        principal_id=world.curator.principal_id,
        personal_scope_id=world.curator.personal_scope_id,
        readable_scope_ids=[world.curator.personal_scope_id, world.project_id],
        target_scope_id=world.project_id, subject="ledger", predicate="depends_on",
        object="redis", evidence_text="seen"))).fact.fact_key
    refused = await world.api.post(f"/curation/projects/payments/proposals/{second}/verify",
                                   json={}, headers=world.curator.auth)
    assert refused.status_code == 403
    assert (refused.json()["error"]["code"], refused.json()["error"]["reason"]) == (
        "unauthorized", "two_person_verification")
    pending = await world.api.get("/curation/projects/payments/proposals",
                                  headers=world.owner.auth)
    assert [p["fact_key"] for p in pending.json()["proposals"]] == [second]
    by_owner = await world.api.post(f"/curation/projects/payments/proposals/{second}/verify",
                                    json={}, headers=world.owner.auth)
    assert by_owner.status_code == 200
    # Direct curation is not a proposal: the curator's ingest stays possible.
    loaded = await world.api.post("/curation/projects/payments/ingest",
                                  json={"records": _records("zookeeper")},
                                  headers=world.curator.auth)
    assert loaded.status_code == 200 and loaded.json()["facts"]["created"] == 1


async def test_an_administrators_refused_ingest_creates_no_project(world: World,
                                                                    pg_dsn: str) -> None:
    """issue 39 item 12: an administrator's ingest into a missing project creates it, but
    only once the request is found whole; a refused one leaves no project behind."""
    root = (await world.identity.CreateUser(
        ipb.CreateUserRequest(display_name="root", admin=True))).principal
    key = (await world.identity.CreateApiKey(
        ipb.CreateApiKeyRequest(principal_id=root.principal_id))).api_key
    auth = {"Authorization": f"Bearer {key}"}

    async def projects() -> int:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return await conn.fetchval("SELECT count(*) FROM identity.projects")
        finally:
            await conn.close()

    before = await projects()
    bad = [{"type": "fact", "subject": "ops-api", "predicate": "depends_on",
            "object": "redis", "source": "adr-404", "repository": "github.com/acme/ops"}]
    refused = await world.api.post("/curation/projects/ops/ingest", json={"records": bad},
                                   headers=auth)
    assert refused.status_code == 400
    assert await projects() == before
    assert refused.json()["error"]["field"] == "records[0]"
    good = [{**bad[0], "source": ""}]
    loaded = await world.api.post("/curation/projects/ops/ingest", json={"records": good},
                                  headers=auth)
    assert loaded.status_code == 200, loaded.text
    assert await projects() == before + 1
