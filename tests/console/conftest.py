"""The console in process: real identity and knowledge services on the test database, the
REST API app in front of them, and users with roles in one workspace's project."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from posixpath import dirname

import httpx
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
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
BASE = "http://127.0.0.1:8081"
CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
NONCE_FIELD = re.compile(r'name="nonce" value="([^"]+)"')
HARVESTED = "github.com/acme/shop"
HARVESTED_AT = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


@dataclass
class User:
    principal_id: str
    personal_scope_id: str
    api_key: str


@dataclass
class ConsoleWorld:
    identity_address: str
    knowledge_address: str
    knowledge: KnowledgeServiceStub
    owner: User
    curator: User
    member: User
    outsider: User
    project_id: str

    def settings(self, **api: object) -> Settings:
        return Settings(environment="dev", mcp={"jwt_secret": SECRET}, api=api,
                        services={"identity": self.identity_address,
                                  "knowledge": self.knowledge_address})

    async def propose(self, subject: str, predicate: str = "depends_on",
                      obj: str = "ledger") -> kpb.ProposeFactResponse:
        return await self.knowledge.ProposeFact(kpb.ProposeFactRequest(
            principal_id=self.member.principal_id,
            personal_scope_id=self.member.personal_scope_id,
            readable_scope_ids=[self.member.personal_scope_id, self.project_id],
            target_scope_id=self.project_id,
            subject=subject, predicate=predicate, object=obj,
            evidence_text=f"seen in {subject}/handler.py",
            context=kpb.TaskContext(runtime="claude-code", task_ref=f"task-{subject}",
                                    repository_ref="github.com/acme/payments")))

    async def propose_harvest(self, files: dict[str, list[tuple[str, str, str, str]]],
                              commit: str = "c0ffee", repository: str = HARVESTED
                              ) -> kpb.ProposeFactsResponse:
        """What ``vera harvest`` files for review: per file (its path) one source and its
        facts as (predicate, object, locator, evidence lines)."""
        observed = Timestamp()
        observed.FromDatetime(HARVESTED_AT)
        return await self.knowledge.ProposeFacts(kpb.ProposeFactsRequest(
            principal_id=self.member.principal_id,
            personal_scope_id=self.member.personal_scope_id, target_scope_id=self.project_id,
            sources=[kpb.SourceInput(
                source_id=f"{repository}/{path}", source_type="repository_file", title=path,
                uri=f"https://{repository}/blob/{commit}/{path}", observed_at=observed)
                for path in files],
            facts=[kpb.FactInput(
                subject="shop-api", predicate=predicate, object=obj,
                source_id=f"{repository}/{path}", locator=locator, evidence=evidence,
                valid_from=observed, repository=repository, code_path=dirname(path))
                for path, facts in files.items() for predicate, obj, locator, evidence in facts]))


async def _user(identity: IdentityServiceStub, name: str) -> User:
    principal = (await identity.CreateUser(ipb.CreateUserRequest(display_name=name))).principal
    key = await identity.CreateApiKey(
        ipb.CreateApiKeyRequest(principal_id=principal.principal_id, label="t"))
    return User(principal.principal_id, principal.personal_scope_id, key.api_key)


@pytest.fixture
async def world(pg_dsn: str) -> AsyncIterator[ConsoleWorld]:
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
                invited = await identity.SetWorkspaceMember(ipb.SetWorkspaceMemberRequest(
                    actor_principal_id=owner.principal_id, workspace_id=workspace.workspace_id,
                    principal_id=user.principal_id, role=role))
                await identity.AcceptInvitation(ipb.AcceptInvitationRequest(
                    actor_principal_id=user.principal_id,
                    invitation_id=invited.invitation.invitation_id))
            yield ConsoleWorld(identity_addr, knowledge_addr, knowledge, owner, curator,
                               member, outsider, project.project_id)
        finally:
            for channel in channels:
                await channel.close()


@pytest.fixture
async def console(world: ConsoleWorld) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the API app, as a browser on the console's own origin."""
    app = build_app(world.settings())
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url=BASE) as client:
            yield client


async def sign_in(client: httpx.AsyncClient, api_key: str) -> str:
    """Signs in through the form as a browser would; returns the page's CSRF token."""
    form = await client.get("/console/sign-in")
    nonce = NONCE_FIELD.search(form.text)
    assert nonce is not None
    signed = await client.post("/console/sign-in", data={"nonce": nonce[1], "api_key": api_key},
                               headers={"origin": BASE})
    assert signed.status_code == 303, signed.text
    return await csrf_token(client, "/console/")


async def csrf_token(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text
    token = CSRF_FIELD.search(page.text)
    assert token is not None
    return token[1]
