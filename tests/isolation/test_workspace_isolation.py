"""Two principals in two workspaces: each reads its personal scope and its own workspace's
projects only; the other's project behaves exactly like a missing one."""

from __future__ import annotations

import uuid

import pytest
from isolation_stack import add_member

from vera.errors import AmbiguousProject, ProjectOutOfScope
from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.client import open_channel


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture
async def stub(identity_address):
    channel = open_channel(identity_address, deadline_seconds=10)
    try:
        yield identity_pb2_grpc.IdentityServiceStub(channel)
    finally:
        await channel.close()


async def tenant(api, stub, name: str) -> tuple[dict, pb.Project]:
    account = (await api.post("/identity/register", json={"display_name": name})).json()
    project = (await stub.EnsureProject(pb.EnsureProjectRequest(
        principal_id=account["principal_id"], slug=f"{name}-app"))).project
    ws = (await api.post("/identity/workspaces", headers=bearer(account["api_key"]),
                         json={"slug": f"{name}-ws"})).json()["workspace_id"]
    attached = await api.post(f"/identity/workspaces/{ws}/projects",
                              headers=bearer(account["api_key"]), json={"project": project.slug})
    assert attached.status_code == 200
    return {**account, "workspace_id": ws}, project


async def test_two_principals_in_two_workspaces(api, stub) -> None:
    alice, alice_project = await tenant(api, stub, "alice")
    bob, bob_project = await tenant(api, stub, "bob")
    # A member bob adds reads bob's project, never alice's.
    carol = (await api.post("/identity/register", json={"display_name": "carol"})).json()
    await add_member(api, bob, bob["workspace_id"], carol)

    for who, own, other in ((alice, alice_project, bob_project),
                            (bob, bob_project, alice_project),
                            (carol, bob_project, alice_project)):
        scopes = await stub.ResolveScopes(pb.ResolveScopesRequest(
            principal_id=who["principal_id"]))
        ids = {p.project_id for p in scopes.projects}
        assert ids == {scopes.personal_scope_id, own.project_id}
        assert other.project_id not in ids
        # Another tenant's project, by id or slug, is indistinguishable from a missing one.
        for reference in (other.project_id, other.slug, str(uuid.uuid4()), "no-such-project"):
            with pytest.raises(ProjectOutOfScope):
                await stub.ResolveProject(pb.ResolveProjectRequest(
                    principal_id=who["principal_id"], project=reference))
        resolved = await stub.ResolveProject(pb.ResolveProjectRequest(
            principal_id=who["principal_id"]))
        assert resolved.project.project_id == own.project_id
    # Another principal's personal scope is never readable either.
    with pytest.raises(ProjectOutOfScope):
        await stub.ResolveProject(pb.ResolveProjectRequest(
            principal_id=carol["principal_id"], project=alice["personal_scope_id"]))

    # A member of both workspaces must choose: ambiguous_project.
    await add_member(api, alice, alice["workspace_id"], carol)
    with pytest.raises(AmbiguousProject):
        await stub.ResolveProject(pb.ResolveProjectRequest(principal_id=carol["principal_id"]))

    # Removal takes the read away at once.
    removed = await api.delete(f"/identity/workspaces/{alice['workspace_id']}/members/"
                               f"{carol['principal_id']}", headers=bearer(alice["api_key"]))
    assert removed.json() == {"removed": True}
    with pytest.raises(ProjectOutOfScope):
        await stub.ResolveProject(pb.ResolveProjectRequest(
            principal_id=carol["principal_id"], project=alice_project.slug))
