"""Identity routes of the REST API: accounts, API keys, workspaces, the MCP token exchange.

Every route is a translation to identity RPCs; the identity service decides who may do
what (administrators, workspace owners). Errors carry the same stable codes as MCP.

    POST   /identity/register                         open deployments only -> principal + API key
    POST   /identity/users                            admin: create a user (+ its first API key)
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

from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import json_format
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vera.api.auth import RestCaller
from vera.api.errors import error_response
from vera.api.rate_limits import charge_registration
from vera.api.requests import json_body, only_fields, page_query
from vera.config import Settings
from vera.errors import InvalidInput, Unauthorized, Unavailable, VeraError
from vera.identity.v1 import identity_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.mcp_tokens import MintedToken, mint, minting_key
from vera.rpc.backends import Backends
from vera.snapshot.v1 import snapshot_pb2

_ROLES = {
    "owner": pb.WORKSPACE_ROLE_OWNER,
    "curator": pb.WORKSPACE_ROLE_CURATOR,
    "member": pb.WORKSPACE_ROLE_MEMBER,
}
_ROLE_NAMES = {v: k for k, v in _ROLES.items()}

Handler = Callable[[Request, RestCaller, dict[str, Any]], Awaitable[Response]]


# Plumbing ------------------------------------------------------------------------------------


# Every answer that carries a key or a token: no cache (browser, proxy) may keep it.
NO_STORE = {"Cache-Control": "no-store"}


def _text(body: dict[str, Any], name: str, default: str = "") -> str:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInput(name)
    return value


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InvalidInput(name)
    return value


def _backends(request: Request) -> Backends:
    return request.app.state.backends


def _unauthenticated_response(error: VeraError) -> Response:
    response = error_response(error)
    if response.status_code == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="vera-api"'
    return response


Endpoint = Callable[[Request], Awaitable[Response]]
Admission = Callable[[Request], Awaitable[RestCaller | None]]


async def _authenticated(request: Request) -> RestCaller:
    return await request.app.state.authenticator.authenticate(request, _backends(request))


async def _while_registration_is_open(request: Request) -> None:
    """Self-registration needs no credential, only a deployment that opened it; a closed
    one refuses before the body is parsed."""
    settings: Settings = request.app.state.settings
    if not settings.api.open_registration:
        raise Unauthorized()
    await charge_registration(request)


def _route(handler: Handler, *, admit: Admission = _authenticated) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            caller = await admit(request)
            body = await json_body(request) if request.method in ("POST", "PUT") else {}
            return await handler(request, caller, body)
        except VeraError as error:
            return _unauthenticated_response(error)

    return endpoint


def _principal(principal: pb.Principal) -> dict[str, Any]:
    return {
        "principal_id": principal.principal_id,
        "display_name": principal.display_name,
        "personal_scope_id": principal.personal_scope_id,
        "admin": principal.admin,
    }


def _key(key: pb.ApiKey) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "label": key.label,
        "created_at": json_format.MessageToJson(key.create_time).strip('"'),
        "revoked_at": (json_format.MessageToJson(key.revoke_time).strip('"')
                       if key.HasField("revoke_time") else None),
    }


def _project(project: pb.Project) -> dict[str, Any]:
    return {
        "project_id": project.project_id,
        "slug": project.slug,
        "display_name": project.display_name,
        "workspace_id": project.workspace_id or None,
    }


async def _new_account(request: Request, actor: str, body: dict[str, Any]) -> Response:
    """Creates the user and its first API key, shown once."""
    identity = _backends(request).identity
    user = await identity.CreateUser(pb.CreateUserRequest(
        actor_principal_id=actor,
        display_name=_text(body, "display_name"),
        admin=_flag(body, "admin"),
        email=_text(body, "email"),
        email_issuer=_text(body, "email_issuer"),
    ))
    key = await identity.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=user.principal.principal_id, label="initial"))
    return JSONResponse(
        {**_principal(user.principal), "api_key": key.api_key, "key_id": key.key.key_id},
        status_code=201,
        headers=NO_STORE,
    )


# Accounts ------------------------------------------------------------------------------------


async def register(request: Request, caller: None, body: dict[str, Any]) -> Response:
    only_fields(body, "display_name")
    return await _new_account(request, "", {**body, "admin": False})


async def create_user(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    # The administrator vouches for the email, valid for external identities of one issuer.
    only_fields(body, "display_name", "admin", "email", "email_issuer")
    return await _new_account(request, caller.principal_id, body)


async def me(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    reply = await _backends(request).identity.GetPrincipal(
        pb.GetPrincipalRequest(principal_id=caller.principal_id))
    return JSONResponse({**_principal(reply.principal), "auth_profile": caller.auth_profile})


# API keys ------------------------------------------------------------------------------------


async def create_api_key(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    only_fields(body, "label")
    reply = await _backends(request).identity.CreateApiKey(pb.CreateApiKeyRequest(
        principal_id=caller.principal_id, label=_text(body, "label")))
    return JSONResponse({**_key(reply.key), "api_key": reply.api_key}, status_code=201,
                        headers=NO_STORE)


async def list_api_keys(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    size, token = page_query(request)
    reply = await _backends(request).identity.ListApiKeys(pb.ListApiKeysRequest(
        principal_id=caller.principal_id, page_size=size, page_token=token))
    return JSONResponse({"keys": [_key(k) for k in reply.keys],
                         "next_page_token": reply.next_page_token or None})


async def revoke_api_key(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    reply = await _backends(request).identity.RevokeApiKey(pb.RevokeApiKeyRequest(
        principal_id=caller.principal_id, key_id=request.path_params["key_id"]))
    return JSONResponse({"revoked": reply.revoked})


# Workspaces ----------------------------------------------------------------------------------


async def create_workspace(request: Request, caller: RestCaller, body: dict[str, Any]
                           ) -> Response:
    only_fields(body, "slug", "display_name", "owner_principal_id")
    reply = await _backends(request).identity.CreateWorkspace(pb.CreateWorkspaceRequest(
        actor_principal_id=caller.principal_id,
        slug=_text(body, "slug"),
        display_name=_text(body, "display_name"),
        owner_principal_id=_text(body, "owner_principal_id"),
    ))
    ws = reply.workspace
    return JSONResponse({"workspace_id": ws.workspace_id, "slug": ws.slug,
                         "display_name": ws.display_name,
                         "owner_principal_id": ws.owner_principal_id}, status_code=201)


async def list_members(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    size, token = page_query(request)
    reply = await _backends(request).identity.ListWorkspaceMembers(
        pb.ListWorkspaceMembersRequest(
            actor_principal_id=caller.principal_id,
            workspace_id=request.path_params["workspace_id"],
            page_size=size, page_token=token))
    return JSONResponse({
        "members": [{"principal_id": m.principal_id, "role": _ROLE_NAMES[m.role]}
                    for m in reply.members],
        "next_page_token": reply.next_page_token or None,
    })


async def set_member(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    only_fields(body, "role")
    role = _ROLES.get(_text(body, "role", "member"))
    if role is None:
        raise InvalidInput("role")
    reply = await _backends(request).identity.SetWorkspaceMember(pb.SetWorkspaceMemberRequest(
        actor_principal_id=caller.principal_id,
        workspace_id=request.path_params["workspace_id"],
        principal_id=request.path_params["principal_id"],
        role=role))
    if reply.HasField("invitation"):
        # Not a member until the invitee accepts: nothing of the workspace is readable yet.
        return JSONResponse(_invitation(reply.invitation), status_code=202)
    return JSONResponse({"principal_id": reply.member.principal_id,
                         "role": _ROLE_NAMES[reply.member.role]})


async def remove_member(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    reply = await _backends(request).identity.RemoveWorkspaceMember(
        pb.RemoveWorkspaceMemberRequest(
            actor_principal_id=caller.principal_id,
            workspace_id=request.path_params["workspace_id"],
            principal_id=request.path_params["principal_id"]))
    return JSONResponse({"removed": reply.removed})


def _invitation(invitation: pb.Invitation) -> dict[str, Any]:
    ws = invitation.workspace
    return {
        "invitation_id": invitation.invitation_id,
        "workspace": {"workspace_id": ws.workspace_id, "slug": ws.slug,
                      "display_name": ws.display_name,
                      "owner_principal_id": ws.owner_principal_id},
        "principal_id": invitation.principal_id,
        "role": _ROLE_NAMES[invitation.role],
        "inviter_principal_id": invitation.inviter_principal_id,
        "created_at": json_format.MessageToJson(invitation.create_time).strip('"'),
        "status": "pending",
    }


async def list_invitations(request: Request, caller: RestCaller, body: dict[str, Any]
                           ) -> Response:
    size, token = page_query(request)
    reply = await _backends(request).identity.ListInvitations(pb.ListInvitationsRequest(
        actor_principal_id=caller.principal_id, page_size=size, page_token=token))
    return JSONResponse({"invitations": [_invitation(i) for i in reply.invitations],
                         "next_page_token": reply.next_page_token or None})


async def accept_invitation(request: Request, caller: RestCaller, body: dict[str, Any]
                            ) -> Response:
    only_fields(body)
    reply = await _backends(request).identity.AcceptInvitation(pb.AcceptInvitationRequest(
        actor_principal_id=caller.principal_id,
        invitation_id=request.path_params["invitation_id"]))
    return JSONResponse({"workspace_id": reply.workspace.workspace_id,
                         "principal_id": reply.member.principal_id,
                         "role": _ROLE_NAMES[reply.member.role]})


async def decline_invitation(request: Request, caller: RestCaller, body: dict[str, Any]
                             ) -> Response:
    only_fields(body)
    reply = await _backends(request).identity.DeclineInvitation(pb.DeclineInvitationRequest(
        actor_principal_id=caller.principal_id,
        invitation_id=request.path_params["invitation_id"]))
    return JSONResponse({**_invitation(reply.invitation), "status": "declined"})


async def attach_project(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    only_fields(body, "project")
    reply = await _backends(request).identity.AttachProject(pb.AttachProjectRequest(
        actor_principal_id=caller.principal_id,
        workspace_id=request.path_params["workspace_id"],
        project=_text(body, "project")))
    return JSONResponse(_project(reply.project), status_code=201 if reply.created else 200)


# Erasure -------------------------------------------------------------------------------------


async def erase_personal_knowledge(request: Request, caller: RestCaller, body: dict[str, Any]
                                   ) -> Response:
    """Administrators only. Physically deletes the principal's personal knowledge: snapshot
    first (persisted packs, snapshots, idempotency results), then knowledge (facts,
    assertions, evidence, proposal attempts, feedback of its personal scope; retrieval drops
    the erased versions from its indexes through the change log). Shared facts a curator
    verified from its proposals stay. The account itself stays. Safe to repeat."""
    if not caller.admin:
        raise Unauthorized()
    backends = _backends(request)
    target = (await backends.identity.GetPrincipal(pb.GetPrincipalRequest(
        principal_id=request.path_params["principal_id"]))).principal
    packs = await backends.snapshot.ErasePrincipalData(
        snapshot_pb2.ErasePrincipalDataRequest(principal_id=target.principal_id))
    erased = await backends.knowledge.ErasePrincipalData(
        knowledge_pb2.ErasePrincipalDataRequest(
            actor_principal_id=caller.principal_id,
            principal_id=target.principal_id,
            personal_scope_id=target.personal_scope_id,
            related_counts=dict(packs.counts)))
    return JSONResponse({
        "principal_id": target.principal_id,
        "counts": {**dict(erased.counts), **dict(packs.counts)},
        "audit_event_id": erased.audit_event_id,
        "change_position": erased.change_position,
    })


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


async def mcp_token(request: Request, caller: RestCaller, body: dict[str, Any]) -> Response:
    settings: Settings = request.app.state.settings
    # Only "scopes": a body naming a principal (or anything else) is refused, never honored.
    only_fields(body, "scopes")
    allowed = mcp_scope_names(settings)
    requested = body.get("scopes", [settings.mcp.scope_read])
    if (not isinstance(requested, list) or not requested
            or not all(isinstance(s, str) and s in allowed for s in requested)):
        raise InvalidInput("scopes")
    scopes = [s for s in allowed if s in requested]  # canonical order, no duplicates
    minted = mint_mcp_token(settings, caller.principal_id, scopes, key_id=caller.key_id)
    return JSONResponse({
        "token": minted.token,
        "access_token": minted.token,
        "token_type": "Bearer",
        "expires_at": minted.expires_at.isoformat().replace("+00:00", "Z"),
        "expires_in": settings.mcp.token_ttl_seconds,
        "scope": " ".join(scopes),
        "principal_id": caller.principal_id,
    }, headers=NO_STORE)


routes = [
    Route("/identity/register", _route(register, admit=_while_registration_is_open),
          methods=["POST"]),
    Route("/identity/users", _route(create_user), methods=["POST"]),
    Route("/identity/me", _route(me), methods=["GET"]),
    Route("/identity/api-keys", _route(create_api_key), methods=["POST"]),
    Route("/identity/api-keys", _route(list_api_keys), methods=["GET"]),
    Route("/identity/api-keys/{key_id}", _route(revoke_api_key), methods=["DELETE"]),
    Route("/identity/workspaces", _route(create_workspace), methods=["POST"]),
    Route("/identity/workspaces/{workspace_id}/members", _route(list_members), methods=["GET"]),
    Route("/identity/workspaces/{workspace_id}/members/{principal_id}", _route(set_member),
          methods=["PUT"]),
    Route("/identity/workspaces/{workspace_id}/members/{principal_id}", _route(remove_member),
          methods=["DELETE"]),
    Route("/identity/workspaces/{workspace_id}/projects", _route(attach_project),
          methods=["POST"]),
    Route("/identity/invitations", _route(list_invitations), methods=["GET"]),
    Route("/identity/invitations/{invitation_id}/accept", _route(accept_invitation),
          methods=["POST"]),
    Route("/identity/invitations/{invitation_id}/decline", _route(decline_invitation),
          methods=["POST"]),
    Route("/identity/mcp-token", _route(mcp_token), methods=["POST"]),
    Route("/identity/users/{principal_id}/personal-knowledge",
          _route(erase_personal_knowledge), methods=["DELETE"]),
]
