"""Accounts through the real gRPC client: workspace membership needs the invitee's consent,
and a verified email an administrator records links external identities of one issuer."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from vera.errors import (
    AmbiguousProject,
    InvalidInput,
    NotFound,
    ProjectOutOfScope,
    Unauthenticated,
    Unauthorized,
)
from vera.identity.v1 import identity_pb2 as pb

IDP = "https://login.idp.test"
OTHER_IDP = "https://other.idp.test"


async def admin(identity) -> pb.Principal:
    return (await identity.stub.CreateUser(
        pb.CreateUserRequest(display_name="root", admin=True))).principal


async def user(identity, actor: pb.Principal, name: str, **extra) -> pb.Principal:
    return (await identity.stub.CreateUser(pb.CreateUserRequest(
        actor_principal_id=actor.principal_id, display_name=name, **extra))).principal


async def tenant(identity, owner: pb.Principal, slug: str) -> tuple[pb.Workspace, pb.Project]:
    """A workspace the owner creates with one shared project of its own attached."""
    project = (await identity.stub.EnsureProject(pb.EnsureProjectRequest(
        principal_id=owner.principal_id, slug=f"{slug}-app"))).project
    workspace = (await identity.stub.CreateWorkspace(pb.CreateWorkspaceRequest(
        actor_principal_id=owner.principal_id, slug=f"{slug}-ws"))).workspace
    await identity.stub.AttachProject(pb.AttachProjectRequest(
        actor_principal_id=owner.principal_id, workspace_id=workspace.workspace_id,
        project=project.project_id))
    return workspace, project


async def readable(identity, who: pb.Principal) -> set[str]:
    scopes = await identity.stub.ResolveScopes(
        pb.ResolveScopesRequest(principal_id=who.principal_id))
    return {p.project_id for p in scopes.projects}


async def members(identity, actor: pb.Principal, workspace: pb.Workspace) -> dict[str, int]:
    page = await identity.stub.ListWorkspaceMembers(pb.ListWorkspaceMembersRequest(
        actor_principal_id=actor.principal_id, workspace_id=workspace.workspace_id))
    return {m.principal_id: m.role for m in page.members}


async def invite(identity, owner, workspace, who, role=pb.WORKSPACE_ROLE_MEMBER):
    return await identity.stub.SetWorkspaceMember(pb.SetWorkspaceMemberRequest(
        actor_principal_id=owner.principal_id, workspace_id=workspace.workspace_id,
        principal_id=who.principal_id, role=role))


async def invitations(identity, who: pb.Principal) -> list[pb.Invitation]:
    return list((await identity.stub.ListInvitations(pb.ListInvitationsRequest(
        actor_principal_id=who.principal_id))).invitations)


async def test_an_owner_only_invites_and_the_invitee_reads_nothing_until_it_accepts(
        identity) -> None:
    root = await admin(identity)
    mallory, victim = await user(identity, root, "mallory"), await user(identity, root, "victim")
    own_ws, own_project = await tenant(identity, victim, "victim")
    ws, project = await tenant(identity, mallory, "mallory")

    reply = await invite(identity, mallory, ws, victim, pb.WORKSPACE_ROLE_CURATOR)
    assert not reply.HasField("member")
    pending = reply.invitation
    assert pending.principal_id == victim.principal_id
    assert pending.workspace.workspace_id == ws.workspace_id
    assert pending.role == pb.WORKSPACE_ROLE_CURATOR
    assert pending.inviter_principal_id == mallory.principal_id
    # Not a member: reads nothing of the workspace, and its project-less calls still
    # resolve to its own single shared project.
    assert await readable(identity, victim) == {victim.personal_scope_id, own_project.project_id}
    resolved = await identity.stub.ResolveProject(pb.ResolveProjectRequest(
        principal_id=victim.principal_id))
    assert resolved.project.project_id == own_project.project_id
    with pytest.raises(ProjectOutOfScope):
        await identity.stub.ResolveProject(pb.ResolveProjectRequest(
            principal_id=victim.principal_id, project=project.slug))
    assert victim.principal_id not in await members(identity, mallory, ws)
    with pytest.raises(NotFound):
        await members(identity, victim, ws)
    # Inviting again renews the one invitation rather than stacking another.
    again = (await invite(identity, mallory, ws, victim)).invitation
    listed = await invitations(identity, victim)
    assert [i.invitation_id for i in listed] == [pending.invitation_id] == [again.invitation_id]
    assert listed[0].role == pb.WORKSPACE_ROLE_MEMBER

    accepted = await identity.stub.AcceptInvitation(pb.AcceptInvitationRequest(
        actor_principal_id=victim.principal_id, invitation_id=pending.invitation_id))
    assert accepted.workspace.workspace_id == ws.workspace_id
    assert (accepted.member.principal_id, accepted.member.role) == (
        victim.principal_id, pb.WORKSPACE_ROLE_MEMBER)
    assert project.project_id in await readable(identity, victim)
    assert (await members(identity, mallory, ws))[victim.principal_id] == pb.WORKSPACE_ROLE_MEMBER
    assert await invitations(identity, victim) == []
    with pytest.raises(AmbiguousProject):
        await identity.stub.ResolveProject(pb.ResolveProjectRequest(
            principal_id=victim.principal_id))
    # A member's role changes directly: it already consented to the workspace.
    promoted = await invite(identity, mallory, ws, victim, pb.WORKSPACE_ROLE_CURATOR)
    assert promoted.member.role == pb.WORKSPACE_ROLE_CURATOR
    assert not promoted.HasField("invitation")
    assert own_ws.workspace_id != ws.workspace_id


async def test_a_declined_or_withdrawn_invitation_grants_nothing(identity) -> None:
    root = await admin(identity)
    owner, invitee = await user(identity, root, "owner"), await user(identity, root, "invitee")
    ws, project = await tenant(identity, owner, "acme")
    first = (await invite(identity, owner, ws, invitee)).invitation
    declined = await identity.stub.DeclineInvitation(pb.DeclineInvitationRequest(
        actor_principal_id=invitee.principal_id, invitation_id=first.invitation_id))
    assert declined.invitation.invitation_id == first.invitation_id
    assert await invitations(identity, invitee) == []
    with pytest.raises(NotFound):
        await identity.stub.AcceptInvitation(pb.AcceptInvitationRequest(
            actor_principal_id=invitee.principal_id, invitation_id=first.invitation_id))
    assert project.project_id not in await readable(identity, invitee)

    # The owner withdraws a pending invitation the way it removes a member.
    second = (await invite(identity, owner, ws, invitee)).invitation
    removed = await identity.stub.RemoveWorkspaceMember(pb.RemoveWorkspaceMemberRequest(
        actor_principal_id=owner.principal_id, workspace_id=ws.workspace_id,
        principal_id=invitee.principal_id))
    assert removed.removed is True
    with pytest.raises(NotFound):
        await identity.stub.AcceptInvitation(pb.AcceptInvitationRequest(
            actor_principal_id=invitee.principal_id, invitation_id=second.invitation_id))
    assert project.project_id not in await readable(identity, invitee)


async def test_an_invitation_lapses_when_its_inviter_is_no_longer_an_owner(identity) -> None:
    root = await admin(identity)
    owner = await user(identity, root, "owner")
    deputy, guest = await user(identity, root, "deputy"), await user(identity, root, "guest")
    ws, project = await tenant(identity, owner, "acme")
    await invite(identity, root, ws, deputy, pb.WORKSPACE_ROLE_OWNER)  # an admin adds directly
    pending = (await invite(identity, deputy, ws, guest, pb.WORKSPACE_ROLE_OWNER)).invitation
    await invite(identity, owner, ws, deputy, pb.WORKSPACE_ROLE_MEMBER)  # demoted
    with pytest.raises(NotFound):
        await identity.stub.AcceptInvitation(pb.AcceptInvitationRequest(
            actor_principal_id=guest.principal_id, invitation_id=pending.invitation_id))
    assert guest.principal_id not in await members(identity, owner, ws)
    assert project.project_id not in await readable(identity, guest)


async def test_another_principals_invitation_behaves_like_a_missing_one(identity) -> None:
    root = await admin(identity)
    owner, invitee, other = [await user(identity, root, n) for n in ("o", "i", "x")]
    ws, _ = await tenant(identity, owner, "acme")
    pending = (await invite(identity, owner, ws, invitee)).invitation
    for invitation_id in (pending.invitation_id, str(uuid.uuid4()), "not-a-uuid"):
        for rpc, request in ((identity.stub.AcceptInvitation, pb.AcceptInvitationRequest),
                             (identity.stub.DeclineInvitation, pb.DeclineInvitationRequest)):
            with pytest.raises(NotFound):
                await rpc(request(actor_principal_id=other.principal_id,
                                  invitation_id=invitation_id))
    assert await invitations(identity, other) == []
    assert [i.invitation_id for i in await invitations(identity, invitee)] == [
        pending.invitation_id]
    with pytest.raises(InvalidInput) as unknown:
        await identity.stub.ListInvitations(pb.ListInvitationsRequest(
            actor_principal_id=str(uuid.uuid4())))
    assert unknown.value.field == "actor_principal_id"


async def test_invitations_are_paged_oldest_first(identity) -> None:
    root = await admin(identity)
    invitee = await user(identity, root, "invitee")
    made = []
    for slug in ("a", "b", "c"):
        owner = await user(identity, root, slug)
        ws, _ = await tenant(identity, owner, slug)
        made.append((await invite(identity, owner, ws, invitee)).invitation.invitation_id)
    first = await identity.stub.ListInvitations(pb.ListInvitationsRequest(
        actor_principal_id=invitee.principal_id, page_size=2))
    rest = await identity.stub.ListInvitations(pb.ListInvitationsRequest(
        actor_principal_id=invitee.principal_id, page_size=2,
        page_token=first.next_page_token))
    assert [i.invitation_id for i in [*first.invitations, *rest.invitations]] == made
    assert first.next_page_token and not rest.next_page_token
    with pytest.raises(InvalidInput) as err:
        await identity.stub.ListInvitations(pb.ListInvitationsRequest(
            actor_principal_id=invitee.principal_id, page_size=101))
    assert err.value.field == "page_size"


async def test_an_administrator_adds_directly_and_supersedes_an_invitation(identity) -> None:
    root = await admin(identity)
    owner, invitee = await user(identity, root, "owner"), await user(identity, root, "invitee")
    ws, project = await tenant(identity, owner, "acme")
    await invite(identity, owner, ws, invitee)
    added = await invite(identity, root, ws, invitee, pb.WORKSPACE_ROLE_CURATOR)
    assert added.member.role == pb.WORKSPACE_ROLE_CURATOR and not added.HasField("invitation")
    assert project.project_id in await readable(identity, invitee)
    assert await invitations(identity, invitee) == []


async def test_an_administrator_records_a_verified_email_for_one_issuer(identity) -> None:
    root = await admin(identity)
    carol = await user(identity, root, "carol", email=" Carol@Example.com ", email_issuer=IDP)

    async def login(issuer: str, subject: str, verified: bool = True):
        return await identity.stub.EnsureExternalPrincipal(pb.EnsureExternalPrincipalRequest(
            issuer=issuer, subject=subject, email="carol@example.COM", email_verified=verified))

    other = await login(OTHER_IDP, "c-1")
    assert other.created is True and other.principal.principal_id != carol.principal_id
    unverified = await login(IDP, "c-2", verified=False)
    assert unverified.created is True and unverified.principal.principal_id != carol.principal_id
    linked = await login(IDP, "c-3")
    assert linked.created is False and linked.principal.principal_id == carol.principal_id


async def test_a_recorded_email_is_vouched_for_by_an_administrator_only(identity, pg_dsn) -> None:
    root = await admin(identity)
    plain = await user(identity, root, "plain")
    for actor, extra, field in (
        (root, {"email": "a@example.com"}, "email_issuer"),
        (root, {"email_issuer": IDP}, "email"),
        (root, {"email": "no-at-sign", "email_issuer": IDP}, "email"),
        (root, {"email": "a@example.com", "email_issuer": "x" * 513}, "email_issuer"),
    ):
        with pytest.raises(InvalidInput) as err:
            await user(identity, actor, "x", **extra)
        assert err.value.field == field
    with pytest.raises(Unauthorized):
        await user(identity, plain, "x", email="a@example.com", email_issuer=IDP)
    with pytest.raises(Unauthorized):  # self-registration records no email
        await identity.stub.CreateUser(pb.CreateUserRequest(
            display_name="x", email="a@example.com", email_issuer=IDP))
    await user(identity, root, "first", email="a@example.com", email_issuer=IDP)
    conn = await asyncpg.connect(pg_dsn)
    try:
        before = await conn.fetchval("SELECT count(*) FROM identity.principals")
        with pytest.raises(InvalidInput) as taken:
            await user(identity, root, "second", email="A@example.com", email_issuer=IDP)
        assert (taken.value.field, taken.value.metadata.get("reason")) == ("email", "taken")
        assert await conn.fetchval("SELECT count(*) FROM identity.principals") == before
        # The same address for another issuer is another identity's to claim.
        await user(identity, root, "third", email="a@example.com", email_issuer=OTHER_IDP)
    finally:
        await conn.close()


async def test_a_just_in_time_email_links_only_from_its_issuer(identity) -> None:
    async def login(issuer: str, subject: str):
        return await identity.stub.EnsureExternalPrincipal(pb.EnsureExternalPrincipalRequest(
            issuer=issuer, subject=subject, email="dave@example.com", email_verified=True))

    first = await login(IDP, "dave")
    elsewhere = await login(OTHER_IDP, "dave-2")
    assert elsewhere.created is True
    assert elsewhere.principal.principal_id != first.principal.principal_id
    same_issuer = await login(IDP, "dave-3")
    assert same_issuer.created is False
    assert same_issuer.principal.principal_id == first.principal.principal_id


@pytest.mark.parametrize("position", [2**63, 10**30])
def test_a_page_token_past_int64_is_invalid_input(position: int) -> None:
    import base64

    from vera.services.identity.accounts import decode_offset, encode_offset

    token = base64.urlsafe_b64encode(f"o{position}".encode()).decode().rstrip("=")
    with pytest.raises(InvalidInput) as caught:
        decode_offset(token)
    assert caught.value.field == "page_token"
    assert decode_offset(encode_offset(40)) == 40


async def attach(identity, actor: pb.Principal, workspace: pb.Workspace, project: str
                 ) -> pb.AttachProjectResponse:
    return await identity.stub.AttachProject(pb.AttachProjectRequest(
        actor_principal_id=actor.principal_id, workspace_id=workspace.workspace_id,
        project=project))


async def test_attaching_a_slug_no_project_holds_creates_it_in_the_workspace(identity) -> None:
    root = await admin(identity)
    lead, dev = await user(identity, root, "lead"), await user(identity, root, "dev")
    workspace = (await identity.stub.CreateWorkspace(pb.CreateWorkspaceRequest(
        actor_principal_id=lead.principal_id, slug="team"))).workspace
    await invite(identity, lead, workspace, dev)
    (pending,) = await invitations(identity, dev)
    await identity.stub.AcceptInvitation(pb.AcceptInvitationRequest(
        actor_principal_id=dev.principal_id, invitation_id=pending.invitation_id))

    created = await attach(identity, lead, workspace, "payments")
    assert created.created
    assert (created.project.slug, created.project.owner_principal_id,
            created.project.workspace_id) == ("payments", lead.principal_id,
                                              workspace.workspace_id)
    again = await attach(identity, lead, workspace, "payments")
    assert (again.created, again.project.project_id) == (False, created.project.project_id)
    # Members read it by its slug.
    resolved = await identity.stub.ResolveProject(pb.ResolveProjectRequest(
        principal_id=dev.principal_id, project="payments"))
    assert resolved.project.project_id == created.project.project_id
    # An administrator creates one in any workspace; it owns what it creates.
    by_admin = await attach(identity, root, workspace, "billing")
    assert by_admin.created and by_admin.project.owner_principal_id == root.principal_id


async def test_only_owners_and_administrators_create_and_slugs_are_checked(identity) -> None:
    root = await admin(identity)
    lead, dev = await user(identity, root, "lead"), await user(identity, root, "dev")
    workspace = (await identity.stub.CreateWorkspace(pb.CreateWorkspaceRequest(
        actor_principal_id=lead.principal_id, slug="team"))).workspace
    await identity.stub.SetWorkspaceMember(pb.SetWorkspaceMemberRequest(
        actor_principal_id=root.principal_id, workspace_id=workspace.workspace_id,
        principal_id=dev.principal_id, role=pb.WORKSPACE_ROLE_CURATOR))
    with pytest.raises(Unauthorized):
        await attach(identity, dev, workspace, "payments")
    for slug, reason in (("Payments!", None), ("personal-1234abcd", "reserved_slug")):
        with pytest.raises(InvalidInput) as refused:
            await attach(identity, lead, workspace, slug)
        assert refused.value.metadata.get("field") == "project"
        assert refused.value.metadata.get("reason") == reason
    # A slug another principal's project holds stays theirs.
    _, theirs = await tenant(identity, dev, "dev")
    with pytest.raises(ProjectOutOfScope):
        await attach(identity, lead, workspace, theirs.slug)


async def authorize(identity, who: pb.Principal, project: str) -> pb.Project:
    return (await identity.stub.AuthorizeCurator(pb.AuthorizeCuratorRequest(
        principal_id=who.principal_id, project=project))).project


async def test_the_curator_rule_owner_or_workspace_owner_or_curator(identity) -> None:
    root = await admin(identity)
    lead, curator, dev, outsider = [await user(identity, root, n)
                                    for n in ("lead", "curator", "dev", "outsider")]
    workspace = (await identity.stub.CreateWorkspace(pb.CreateWorkspaceRequest(
        actor_principal_id=root.principal_id, slug="team",
        owner_principal_id=lead.principal_id))).workspace
    for who, role in ((curator, pb.WORKSPACE_ROLE_CURATOR), (dev, pb.WORKSPACE_ROLE_MEMBER)):
        await identity.stub.SetWorkspaceMember(pb.SetWorkspaceMemberRequest(
            actor_principal_id=root.principal_id, workspace_id=workspace.workspace_id,
            principal_id=who.principal_id, role=role))
    project = (await attach(identity, root, workspace, "payments")).project
    for who in (root, lead, curator):  # project owner, workspace owner, workspace curator
        assert (await authorize(identity, who, "payments")).project_id == project.project_id
    with pytest.raises(Unauthorized) as refused:
        await authorize(identity, dev, "payments")
    assert refused.value.metadata == {"required_role": "curator"}
    with pytest.raises(ProjectOutOfScope):
        await authorize(identity, outsider, "payments")
    with pytest.raises(InvalidInput) as refused:
        await authorize(identity, dev, dev.personal_scope_id)
    assert refused.value.metadata == {"field": "project", "reason": "not_shared"}
    # The same rule maps repositories: a workspace curator may, a member may not.
    mapped = await identity.stub.MapRepository(pb.MapRepositoryRequest(
        principal_id=curator.principal_id, project_id=project.project_id,
        repository="git@github.com:acme/payments.git"))
    assert mapped.created
    with pytest.raises(Unauthorized):
        await identity.stub.MapRepository(pb.MapRepositoryRequest(
            principal_id=dev.principal_id, project_id=project.project_id,
            repository="git@github.com:acme/payments.git"))


async def test_a_credential_stands_while_its_key_is_the_principals_and_unrevoked(
        identity) -> None:
    root = await admin(identity)
    alice, bob = await user(identity, root, "alice"), await user(identity, root, "bob")
    key = (await identity.stub.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=alice.principal_id))).key

    async def state(who: pb.Principal, key_id: str) -> int:
        return (await identity.stub.CheckCredential(pb.CheckCredentialRequest(
            principal_id=who.principal_id, key_id=key_id))).state

    checked = await identity.stub.CheckCredential(pb.CheckCredentialRequest(
        principal_id=alice.principal_id, key_id=key.key_id))
    assert checked.state == pb.CREDENTIAL_STATE_ACTIVE
    assert checked.principal.principal_id == alice.principal_id
    # Another principal's key, an unknown one, a malformed one: none stands.
    assert await state(bob, key.key_id) == pb.CREDENTIAL_STATE_KEY_REVOKED
    for unknown in ("0" * 16, "local", "", "x" * 300):
        assert await state(alice, unknown) == pb.CREDENTIAL_STATE_KEY_REVOKED
    await identity.stub.RevokeApiKey(pb.RevokeApiKeyRequest(
        principal_id=alice.principal_id, key_id=key.key_id))
    assert await state(alice, key.key_id) == pb.CREDENTIAL_STATE_KEY_REVOKED
    with pytest.raises(InvalidInput):
        await identity.stub.CheckCredential(pb.CheckCredentialRequest(
            principal_id=str(uuid.uuid4()), key_id=key.key_id))


async def test_authenticating_an_api_key_names_its_id(identity) -> None:
    root = await admin(identity)
    created = await identity.stub.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=root.principal_id))
    reply = await identity.stub.AuthenticateApiKey(pb.AuthenticateApiKeyRequest(
        api_key=created.api_key))
    assert reply.key_id == created.key.key_id


async def test_an_administrator_disables_and_re_enables_a_user(identity) -> None:
    root = await admin(identity)
    alice, bob = await user(identity, root, "alice"), await user(identity, root, "bob")
    key = await identity.stub.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=alice.principal_id))

    async def state() -> int:
        return (await identity.stub.CheckCredential(pb.CheckCredentialRequest(
            principal_id=alice.principal_id, key_id=key.key.key_id))).state

    async def set_disabled(actor: pb.Principal, who: pb.Principal, disabled: bool):
        return await identity.stub.SetUserDisabled(pb.SetUserDisabledRequest(
            actor_principal_id=actor.principal_id, principal_id=who.principal_id,
            disabled=disabled))

    # Only an administrator, and never itself (a deployment keeps its administrator).
    with pytest.raises(Unauthorized):
        await set_disabled(bob, alice, True)
    with pytest.raises(InvalidInput):
        await set_disabled(root, root, True)

    disabled = await set_disabled(root, alice, True)
    assert (disabled.changed, disabled.principal.disabled) == (True, True)
    assert (await set_disabled(root, alice, True)).changed is False
    assert await state() == pb.CREDENTIAL_STATE_PRINCIPAL_DISABLED
    with pytest.raises(Unauthenticated):
        await identity.stub.AuthenticateApiKey(pb.AuthenticateApiKeyRequest(
            api_key=key.api_key))
    listed = await identity.stub.ListUsers(pb.ListUsersRequest(
        actor_principal_id=root.principal_id, page_size=100))
    by_id = {u.principal_id: u for u in listed.users}
    assert by_id[alice.principal_id].disabled and not by_id[bob.principal_id].disabled
    assert by_id[alice.principal_id].display_name == "alice"

    enabled = await set_disabled(root, alice, False)
    assert (enabled.changed, enabled.principal.disabled) == (True, False)
    assert await state() == pb.CREDENTIAL_STATE_ACTIVE
    assert (await identity.stub.AuthenticateApiKey(pb.AuthenticateApiKeyRequest(
        api_key=key.api_key))).principal.principal_id == alice.principal_id


async def test_users_are_listed_to_administrators_only_and_paged(identity) -> None:
    root = await admin(identity)
    made = [await user(identity, root, f"user-{i}") for i in range(3)]
    with pytest.raises(Unauthorized):
        await identity.stub.ListUsers(pb.ListUsersRequest(actor_principal_id=made[0].principal_id))
    seen, token = [], ""
    while True:
        page = await identity.stub.ListUsers(pb.ListUsersRequest(
            actor_principal_id=root.principal_id, page_size=2, page_token=token))
        assert len(page.users) <= 2
        seen += [u.principal_id for u in page.users]
        if not (token := page.next_page_token):
            break
    assert seen[-4:] == [root.principal_id, *(u.principal_id for u in made)]
    assert len(seen) == len(set(seen))


async def test_an_administrator_revokes_anyones_key_and_no_one_else_does(identity) -> None:
    root = await admin(identity)
    alice, bob = await user(identity, root, "alice"), await user(identity, root, "bob")
    key = (await identity.stub.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=alice.principal_id))).key
    with pytest.raises(Unauthorized):
        await identity.stub.RevokeApiKey(pb.RevokeApiKeyRequest(
            principal_id=alice.principal_id, key_id=key.key_id,
            actor_principal_id=bob.principal_id))
    with pytest.raises(Unauthorized):
        await identity.stub.ListApiKeys(pb.ListApiKeysRequest(
            principal_id=alice.principal_id, actor_principal_id=bob.principal_id))
    keys = await identity.stub.ListApiKeys(pb.ListApiKeysRequest(
        principal_id=alice.principal_id, actor_principal_id=root.principal_id))
    assert key.key_id in {k.key_id for k in keys.keys}
    revoked = await identity.stub.RevokeApiKey(pb.RevokeApiKeyRequest(
        principal_id=alice.principal_id, key_id=key.key_id,
        actor_principal_id=root.principal_id))
    assert revoked.revoked is True


async def test_a_disabled_users_external_login_is_refused(identity) -> None:
    first = await identity.stub.EnsureExternalPrincipal(pb.EnsureExternalPrincipalRequest(
        issuer=IDP, subject="carol"))
    root = await admin(identity)
    await identity.stub.SetUserDisabled(pb.SetUserDisabledRequest(
        actor_principal_id=root.principal_id, principal_id=first.principal.principal_id,
        disabled=True))
    with pytest.raises(Unauthenticated):
        await identity.stub.EnsureExternalPrincipal(pb.EnsureExternalPrincipalRequest(
            issuer=IDP, subject="carol"))


async def test_member_lists_name_the_members(identity) -> None:
    root = await admin(identity)
    owner = await user(identity, root, "Olive Owner")
    workspace, _ = await tenant(identity, owner, "names")
    page = await identity.stub.ListWorkspaceMembers(pb.ListWorkspaceMembersRequest(
        actor_principal_id=owner.principal_id, workspace_id=workspace.workspace_id))
    assert [(m.principal_id, m.display_name) for m in page.members] == [
        (owner.principal_id, "Olive Owner")]
