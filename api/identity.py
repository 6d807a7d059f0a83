"""Identity routes of the REST API: accounts, API keys, workspaces, the MCP token exchange.

Every route is a translation to identity RPCs; the identity service decides who may do
what (administrators, workspace owners). Bodies and answers are the models below (served in
``/openapi.json``); errors carry the same stable codes as MCP.

    POST   /identity/register                         open deployments only -> principal + API key
    POST   /identity/users                            admin: create a user (+ its first API key)
    GET    /identity/users                            admin: users (names, active), paged
    POST   /identity/users/{pid}/disable              admin: stop the user's keys, tokens and
                                                      console sessions
    POST   /identity/users/{pid}/enable               admin: undo it
    GET    /identity/users/{pid}/api-keys             admin: the user's keys, paged
    DELETE /identity/users/{pid}/api-keys/{key_id}    admin: revoke one of the user's keys
    GET    /identity/me                               the caller
    POST   /identity/api-keys                         a new API key for the caller (shown once)
    GET    /identity/api-keys                         the caller's keys (never secrets), paged
    DELETE /identity/api-keys/{key_id}                revoke one of the caller's keys
    POST   /identity/workspaces                       create a workspace (the caller owns it)
    GET    /identity/workspaces/{id}/members          members (member or admin), paged
    PUT    /identity/workspaces/{id}/members/{pid}    change a member's role (owner, admin); a
                                                      non-member: an owner invites it (202),
                                                      an administrator adds it directly
    DELETE /identity/workspaces/{id}/members/{pid}    remove a member or its invitation (owner,
                                                      admin)
    GET    /identity/invitations                      the caller's pending invitations, paged
    POST   /identity/invitations/{id}/accept          join the workspace it invites to
    POST   /identity/invitations/{id}/decline         delete it
    POST   /identity/workspaces/{id}/projects         attach a shared project (owner, admin);
                                                      a slug no project holds creates it (201),
                                                      owned by the caller
    POST   /identity/mcp-token                        an MCP JWT for the caller, naming the API
                                                      key it was minted from and ending after
                                                      VERA_MCP__TOKEN_TTL_SECONDS
    DELETE /identity/users/{pid}/personal-knowledge   admin: erase a principal's personal
                                                      knowledge (see erase_personal_knowledge)
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import Depends, Path
from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vera import limits
from vera.api.errors import ErrorBody
from vera.api.models import timestamp
from vera.api.rate_limits import charge_registration
from vera.api.routing import (
    Admission,
    AppSettings,
    Caller,
    Page,
    RequestBody,
    ResponseBody,
    Services,
    new_router,
)
from vera.config import Settings
from vera.errors import InvalidInput, Unauthorized, Unavailable
from vera.identity.v1 import identity_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.mcp_tokens import MintedToken, mint, minting_key
from vera.rpc.backends import Backends
from vera.snapshot.v1 import snapshot_pb2

Role = Literal["owner", "curator", "member"]
_ROLES = {
    "owner": pb.WORKSPACE_ROLE_OWNER,
    "curator": pb.WORKSPACE_ROLE_CURATOR,
    "member": pb.WORKSPACE_ROLE_MEMBER,
}
_ROLE_NAMES: dict[int, Role] = {v: k for k, v in _ROLES.items()}  # type: ignore[misc]

# Every answer that carries a key or a token: no cache (browser, proxy) may keep it.
NO_STORE = {"Cache-Control": "no-store"}

NAME_MAX = 256
Id = Annotated[str, Path(min_length=1, max_length=limits.ID_LIKE[1])]
Text = Annotated[str, Field(max_length=NAME_MAX)]

router = new_router("/identity", tags=["identity"])


async def _while_registration_is_open(request: Request) -> None:
    """Self-registration needs no credential, only a deployment that opened it; a closed
    one refuses before the body is read."""
    settings: Settings = request.app.state.settings
    if not settings.api.open_registration:
        raise Unauthorized()
    await charge_registration(request)


registration_open: Admission[None] = Admission(_while_registration_is_open)


# Bodies --------------------------------------------------------------------------------------


class RegisterBody(RequestBody):
    display_name: Text = ""


class NewUserBody(RequestBody):
    """The administrator vouches for ``email``, valid for external identities of
    ``email_issuer`` (both or neither)."""

    display_name: Text = ""
    admin: bool = False
    email: Annotated[str, Field(max_length=320)] = ""
    email_issuer: Annotated[str, Field(max_length=2048)] = ""


class NewKeyBody(RequestBody):
    label: Text = ""


class NewWorkspaceBody(RequestBody):
    slug: Text = ""
    display_name: Text = ""
    owner_principal_id: Annotated[str, Field(max_length=limits.ID_LIKE[1])] = ""


class MemberBody(RequestBody):
    role: Role = "member"


class AttachBody(RequestBody):
    project: Annotated[str, Field(max_length=limits.ID_LIKE[1])] = ""


class EmptyBody(RequestBody):
    pass


# Answers -------------------------------------------------------------------------------------


class Principal(ResponseBody):
    principal_id: str
    display_name: str
    personal_scope_id: str
    admin: bool


class Me(Principal):
    auth_profile: str


class NewAccount(Principal):
    """The account and its first API key, shown this once."""

    api_key: str
    key_id: str


class ApiKey(ResponseBody):
    key_id: str
    label: str
    created_at: datetime | None
    revoked_at: datetime | None


class NewApiKey(ApiKey):
    """The key, shown this once."""

    api_key: str


class ApiKeysPage(ResponseBody):
    keys: list[ApiKey]
    next_page_token: str | None


class Revoked(ResponseBody):
    revoked: bool


class Workspace(ResponseBody):
    workspace_id: str
    slug: str
    display_name: str
    owner_principal_id: str


class Member(ResponseBody):
    principal_id: str
    role: Role
    display_name: str


class MembersPage(ResponseBody):
    members: list[Member]
    next_page_token: str | None


class Removed(ResponseBody):
    removed: bool


class Invitation(ResponseBody):
    invitation_id: str
    workspace: Workspace
    principal_id: str
    role: Role
    inviter_principal_id: str
    created_at: datetime | None
    status: Literal["pending", "declined"]


class InvitationsPage(ResponseBody):
    invitations: list[Invitation]
    next_page_token: str | None


class Joined(ResponseBody):
    workspace_id: str
    principal_id: str
    role: Role


class Project(ResponseBody):
    project_id: str
    slug: str
    display_name: str
    workspace_id: str | None


class User(ResponseBody):
    principal_id: str
    display_name: str
    admin: bool
    # False while an administrator has the user disabled.
    active: bool


class UsersPage(ResponseBody):
    users: list[User]
    next_page_token: str | None


class Erased(ResponseBody):
    principal_id: str
    counts: dict[str, int]
    audit_event_id: str
    change_position: int


# Translations --------------------------------------------------------------------------------


def _principal(principal: pb.Principal) -> dict[str, object]:
    return {"principal_id": principal.principal_id, "display_name": principal.display_name,
            "personal_scope_id": principal.personal_scope_id, "admin": principal.admin}


def _key(key: pb.ApiKey) -> dict[str, object]:
    return {"key_id": key.key_id, "label": key.label,
            "created_at": timestamp(key.create_time) if key.HasField("create_time") else None,
            "revoked_at": timestamp(key.revoke_time) if key.HasField("revoke_time") else None}


def _workspace(ws: pb.Workspace) -> Workspace:
    return Workspace(workspace_id=ws.workspace_id, slug=ws.slug, display_name=ws.display_name,
                     owner_principal_id=ws.owner_principal_id)


def _invitation(invitation: pb.Invitation, status: Literal["pending", "declined"] = "pending"
                ) -> Invitation:
    return Invitation(
        invitation_id=invitation.invitation_id, workspace=_workspace(invitation.workspace),
        principal_id=invitation.principal_id, role=_ROLE_NAMES[invitation.role],
        inviter_principal_id=invitation.inviter_principal_id,
        created_at=timestamp(invitation.create_time)
        if invitation.HasField("create_time") else None,
        status=status)


def _no_store(answer: ResponseBody, status: int = 200) -> JSONResponse:
    return JSONResponse(answer.model_dump(mode="json"), status_code=status, headers=NO_STORE)


async def _new_account(services: Backends, actor: str, body: NewUserBody) -> Response:
    """Creates the user and its first API key, shown once."""
    user = await services.identity.CreateUser(pb.CreateUserRequest(
        actor_principal_id=actor, display_name=body.display_name, admin=body.admin,
        email=body.email, email_issuer=body.email_issuer))
    key = await services.identity.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=user.principal.principal_id, label="initial"))
    return _no_store(NewAccount(**_principal(user.principal),
                                api_key=key.api_key, key_id=key.key.key_id), 201)


# Accounts ------------------------------------------------------------------------------------


@router.post("/register", status_code=201, response_model=NewAccount,
             dependencies=[Depends(registration_open)])
async def register(services: Services, body: RegisterBody | None = None) -> Response:
    """Open deployments only (``VERA_API__OPEN_REGISTRATION``): a non-administrator
    account and its first API key."""
    return await _new_account(services, "", NewUserBody(
        display_name=(body or RegisterBody()).display_name))


@router.post("/users", status_code=201, response_model=NewAccount)
async def create_user(caller: Caller, services: Services,
                      body: NewUserBody | None = None) -> Response:
    """Administrators: a user and its first API key."""
    return await _new_account(services, caller.principal_id, body or NewUserBody())


@router.get("/me")
async def me(caller: Caller, services: Services) -> Me:
    reply = await services.identity.GetPrincipal(
        pb.GetPrincipalRequest(principal_id=caller.principal_id))
    return Me(**_principal(reply.principal),
              auth_profile=caller.auth_profile)


def _user(principal: pb.Principal) -> User:
    return User(principal_id=principal.principal_id, display_name=principal.display_name,
                admin=principal.admin, active=not principal.disabled)


@router.get("/users")
async def list_users(page: Page, caller: Caller, services: Services) -> UsersPage:
    """Administrators: every user, oldest first, with whether it is active."""
    reply = await services.identity.ListUsers(pb.ListUsersRequest(
        actor_principal_id=caller.principal_id, page_size=page.page_size,
        page_token=page.page_token))
    return UsersPage(users=[_user(u) for u in reply.users],
                     next_page_token=reply.next_page_token or None)


async def _set_disabled(caller: Caller, services: Services, principal_id: str,
                        disabled: bool) -> User:
    reply = await services.identity.SetUserDisabled(pb.SetUserDisabledRequest(
        actor_principal_id=caller.principal_id, principal_id=principal_id, disabled=disabled))
    return _user(reply.principal)


@router.post("/users/{principal_id}/disable")
async def disable_user(principal_id: Id, caller: Caller, services: Services,
                       body: EmptyBody | None = None) -> User:
    """Administrators (never themselves): the user's API keys authenticate nothing, its MCP
    tokens are refused (``principal_disabled``) and its console sessions end, within
    VERA_MCP__REVOCATION_CACHE_SECONDS. Nothing it wrote changes."""
    return await _set_disabled(caller, services, principal_id, True)


@router.post("/users/{principal_id}/enable")
async def enable_user(principal_id: Id, caller: Caller, services: Services,
                      body: EmptyBody | None = None) -> User:
    """Administrators: the user's unrevoked keys work again."""
    return await _set_disabled(caller, services, principal_id, False)


@router.get("/users/{principal_id}/api-keys")
async def list_user_api_keys(principal_id: Id, page: Page, caller: Caller,
                             services: Services) -> ApiKeysPage:
    """Administrators (or the user itself): the user's keys, never their secrets."""
    reply = await services.identity.ListApiKeys(pb.ListApiKeysRequest(
        principal_id=principal_id, actor_principal_id=caller.principal_id,
        page_size=page.page_size, page_token=page.page_token))
    return ApiKeysPage(keys=[ApiKey(**_key(k)) for k in reply.keys],
                       next_page_token=reply.next_page_token or None)


@router.delete("/users/{principal_id}/api-keys/{key_id}")
async def revoke_user_api_key(principal_id: Id, key_id: Id, caller: Caller,
                              services: Services) -> Revoked:
    """Administrators (or the user itself): revokes one of the user's keys."""
    reply = await services.identity.RevokeApiKey(pb.RevokeApiKeyRequest(
        principal_id=principal_id, key_id=key_id, actor_principal_id=caller.principal_id))
    return Revoked(revoked=reply.revoked)


# API keys ------------------------------------------------------------------------------------


@router.post("/api-keys", status_code=201, response_model=NewApiKey)
async def create_api_key(caller: Caller, services: Services,
                         body: NewKeyBody | None = None) -> Response:
    reply = await services.identity.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=caller.principal_id, label=(body or NewKeyBody()).label))
    return _no_store(NewApiKey(**_key(reply.key),
                               api_key=reply.api_key), 201)


@router.get("/api-keys")
async def list_api_keys(page: Page, caller: Caller, services: Services) -> ApiKeysPage:
    """The caller's keys, never their secrets."""
    reply = await services.identity.ListApiKeys(pb.ListApiKeysRequest(
        principal_id=caller.principal_id, page_size=page.page_size, page_token=page.page_token))
    return ApiKeysPage(keys=[ApiKey(**_key(k)) for k in reply.keys],
                       next_page_token=reply.next_page_token or None)


@router.delete("/api-keys/{key_id}")
async def revoke_api_key(key_id: Id, caller: Caller, services: Services) -> Revoked:
    reply = await services.identity.RevokeApiKey(pb.RevokeApiKeyRequest(
        principal_id=caller.principal_id, key_id=key_id))
    return Revoked(revoked=reply.revoked)


# Workspaces ----------------------------------------------------------------------------------


@router.post("/workspaces", status_code=201)
async def create_workspace(caller: Caller, services: Services,
                           body: NewWorkspaceBody | None = None) -> Workspace:
    """A workspace the caller owns (an administrator may name another owner)."""
    body = body or NewWorkspaceBody()
    reply = await services.identity.CreateWorkspace(pb.CreateWorkspaceRequest(
        actor_principal_id=caller.principal_id, slug=body.slug, display_name=body.display_name,
        owner_principal_id=body.owner_principal_id))
    return _workspace(reply.workspace)


@router.get("/workspaces/{workspace_id}/members")
async def list_members(workspace_id: Id, page: Page, caller: Caller,
                       services: Services) -> MembersPage:
    """Members, for a member or an administrator."""
    reply = await services.identity.ListWorkspaceMembers(pb.ListWorkspaceMembersRequest(
        actor_principal_id=caller.principal_id, workspace_id=workspace_id,
        page_size=page.page_size, page_token=page.page_token))
    return MembersPage(
        members=[Member(principal_id=m.principal_id, role=_ROLE_NAMES[m.role],
                        display_name=m.display_name)
                 for m in reply.members],
        next_page_token=reply.next_page_token or None)


@router.put("/workspaces/{workspace_id}/members/{principal_id}", response_model=Member,
            responses={202: {"model": Invitation,
                             "description": "an owner invited a non-member"}})
async def set_member(workspace_id: Id, principal_id: Id, caller: Caller, services: Services,
                     body: MemberBody | None = None) -> Member | Response:
    """A member's role (owner, admin). A non-member: an owner invites it (202), an
    administrator adds it directly."""
    reply = await services.identity.SetWorkspaceMember(pb.SetWorkspaceMemberRequest(
        actor_principal_id=caller.principal_id, workspace_id=workspace_id,
        principal_id=principal_id, role=_ROLES[(body or MemberBody()).role]))
    if reply.HasField("invitation"):
        # Not a member until the invitee accepts: nothing of the workspace is readable yet.
        return JSONResponse(_invitation(reply.invitation).model_dump(mode="json"),
                            status_code=202)
    return Member(principal_id=reply.member.principal_id, role=_ROLE_NAMES[reply.member.role],
                  display_name=reply.member.display_name)


@router.delete("/workspaces/{workspace_id}/members/{principal_id}")
async def remove_member(workspace_id: Id, principal_id: Id, caller: Caller,
                        services: Services) -> Removed:
    """A member or its invitation (owner, admin)."""
    reply = await services.identity.RemoveWorkspaceMember(pb.RemoveWorkspaceMemberRequest(
        actor_principal_id=caller.principal_id, workspace_id=workspace_id,
        principal_id=principal_id))
    return Removed(removed=reply.removed)


@router.post("/workspaces/{workspace_id}/projects", response_model=Project,
             responses={201: {"model": Project, "description": "created"}})
async def attach_project(workspace_id: Id, caller: Caller, services: Services,
                         body: AttachBody | None = None) -> Response:
    """Attaches a shared project (owner, admin); a slug no project holds creates it (201),
    owned by the caller."""
    reply = await services.identity.AttachProject(pb.AttachProjectRequest(
        actor_principal_id=caller.principal_id, workspace_id=workspace_id,
        project=(body or AttachBody()).project))
    project = reply.project
    answer = Project(project_id=project.project_id, slug=project.slug,
                     display_name=project.display_name,
                     workspace_id=project.workspace_id or None)
    return JSONResponse(answer.model_dump(mode="json"), status_code=201 if reply.created else 200)


@router.get("/invitations")
async def list_invitations(page: Page, caller: Caller, services: Services) -> InvitationsPage:
    """The caller's pending invitations."""
    reply = await services.identity.ListInvitations(pb.ListInvitationsRequest(
        actor_principal_id=caller.principal_id, page_size=page.page_size,
        page_token=page.page_token))
    return InvitationsPage(invitations=[_invitation(i) for i in reply.invitations],
                           next_page_token=reply.next_page_token or None)


@router.post("/invitations/{invitation_id}/accept")
async def accept_invitation(invitation_id: Id, caller: Caller, services: Services,
                            body: EmptyBody | None = None) -> Joined:
    """Joins the workspace it invites to."""
    reply = await services.identity.AcceptInvitation(pb.AcceptInvitationRequest(
        actor_principal_id=caller.principal_id, invitation_id=invitation_id))
    return Joined(workspace_id=reply.workspace.workspace_id,
                  principal_id=reply.member.principal_id, role=_ROLE_NAMES[reply.member.role])


@router.post("/invitations/{invitation_id}/decline")
async def decline_invitation(invitation_id: Id, caller: Caller, services: Services,
                             body: EmptyBody | None = None) -> Invitation:
    """Deletes it."""
    reply = await services.identity.DeclineInvitation(pb.DeclineInvitationRequest(
        actor_principal_id=caller.principal_id, invitation_id=invitation_id))
    return _invitation(reply.invitation, "declined")


# Erasure -------------------------------------------------------------------------------------


@router.delete("/users/{principal_id}/personal-knowledge")
async def erase_personal_knowledge(principal_id: Id, caller: Caller,
                                   services: Services) -> Erased:
    """Administrators only. Physically deletes the principal's personal knowledge: snapshot
    first (persisted packs, snapshots, idempotency results), then knowledge (facts,
    assertions, evidence, proposal attempts, feedback of its personal scope; retrieval drops
    the erased versions from its indexes through the change log). Shared facts a curator
    verified from its proposals stay. The account itself stays. Safe to repeat."""
    if not caller.admin:
        raise Unauthorized()
    target = (await services.identity.GetPrincipal(pb.GetPrincipalRequest(
        principal_id=principal_id))).principal
    packs = await services.snapshot.ErasePrincipalData(
        snapshot_pb2.ErasePrincipalDataRequest(principal_id=target.principal_id))
    erased = await services.knowledge.ErasePrincipalData(
        knowledge_pb2.ErasePrincipalDataRequest(
            actor_principal_id=caller.principal_id,
            principal_id=target.principal_id,
            personal_scope_id=target.personal_scope_id,
            related_counts=dict(packs.counts)))
    return Erased(principal_id=target.principal_id,
                  counts={**dict(erased.counts), **dict(packs.counts)},
                  audit_event_id=erased.audit_event_id,
                  change_position=erased.change_position)


# The MCP token exchange ----------------------------------------------------------------------


def mcp_scope_names(settings: Settings) -> list[str]:
    mcp = settings.mcp
    return [mcp.scope_read, mcp.scope_propose, mcp.scope_feedback, mcp.scope_snapshot]


def mint_mcp_token(
    settings: Settings,
    principal_id: str,
    scopes: list[str],
    *,
    key_id: str,
    lifetime_seconds: int | None = None,
) -> MintedToken:
    """A built-in MCP JWT minted from the credential ``key_id``, ending after
    ``VERA_MCP__TOKEN_TTL_SECONDS`` (``lifetime_seconds`` bounds one made for a single use).
    Raises ``Unavailable`` when issuance is not configured."""
    key = minting_key(settings)
    if key is None or not key_id:
        raise Unavailable()
    lifetime = settings.mcp.token_ttl_seconds
    if lifetime_seconds is not None:
        lifetime = min(lifetime, lifetime_seconds)
    return mint(key, principal_id, scopes, key_id=key_id, lifetime_seconds=lifetime)


class McpTokenBody(RequestBody):
    """Only ``scopes`` (default: read): a body naming a principal (or anything else) is
    refused, never honored."""

    scopes: Annotated[list[Annotated[str, Field(max_length=NAME_MAX)]],
                      Field(min_length=1, max_length=8)] | None = None


class McpToken(ResponseBody):
    token: str
    # The same token, under OAuth's name (clients of earlier releases read it).
    access_token: str
    token_type: Literal["Bearer"]
    expires_at: datetime
    expires_in: int
    scope: str
    principal_id: str


@router.post("/mcp-token", response_model=McpToken, responses={
    503: {"model": ErrorBody, "description": "`unavailable`: token issuance is not configured"}})
async def mcp_token(caller: Caller, settings: AppSettings, services: Services,
                    body: McpTokenBody | None = None) -> Response:
    """An MCP JWT for the caller, naming the API key it was minted from and ending after
    VERA_MCP__TOKEN_TTL_SECONDS (503 where issuance is not configured)."""
    allowed = mcp_scope_names(settings)
    requested = (body.scopes if body else None) or [settings.mcp.scope_read]
    unknown = next((i for i, s in enumerate(requested) if s not in allowed), None)
    if unknown is not None:
        raise InvalidInput(f"scopes[{unknown}]", reason="not_allowed")
    scopes = [s for s in allowed if s in requested]  # canonical order, no duplicates
    minted = mint_mcp_token(settings, caller.principal_id, scopes, key_id=caller.key_id)
    await services.identity.RecordMcpTokenMinted(pb.RecordMcpTokenMintedRequest(
        principal_id=caller.principal_id, key_id=caller.key_id))
    return _no_store(McpToken(
        token=minted.token, access_token=minted.token, token_type="Bearer",
        expires_at=minted.expires_at, expires_in=settings.mcp.token_ttl_seconds,
        scope=" ".join(scopes), principal_id=caller.principal_id))
