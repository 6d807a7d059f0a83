"""Curation over the REST API: real identity and knowledge services, API-key callers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

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
                                project.project_id)
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
        context=kpb.TaskContext(runtime="claude-code", task_ref="t-1")))
    return reply.fact.fact_key


async def test_curator_lists_verifies_and_rejects(world: World) -> None:
    first, second = await _propose(world, "a"), await _propose(world, "b")
    listed = await world.api.get("/curation/projects/payments/proposals?page_size=1",
                                 headers=world.curator.auth)
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["total"] == 2 and [p["fact_key"] for p in body["proposals"]] == [first]
    assert body["proposals"][0]["proposer_principal_id"] == world.member.principal_id
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
    assert body["total"] == 2
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
