"""Curation routes of the REST API: humans review proposals and retract sources.

Agents never reach these: the MCP gateway has no curation tool, and this process
authenticates with its own authenticator (an MCP token is not an API key). Only the
project's owner, or an owner or curator of the project's workspace, may curate a project;
the knowledge service then decides what a decision writes.

    GET  /curation/projects/{project}/proposals                       pending, paged
    GET  /curation/projects/{project}/conflicted-attempts     refused as conflicted, paged
    POST /curation/projects/{project}/proposals/{fact_key}/verify  {trust_tier?, authority?, note?}
    POST /curation/projects/{project}/proposals/{fact_key}/reject     {reason}
    POST /curation/projects/{project}/sources/{source_id}/retract     {reason}

``project`` is a project id or slug. Errors carry the same stable codes as MCP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vera.api.auth import RestCaller
from vera.api.errors import error_response
from vera.api.requests import json_body, only_fields, page_query
from vera.errors import InvalidInput, Unauthorized, VeraError
from vera.identity.v1 import identity_pb2 as ipb
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends

CURATING_ROLES = (ipb.WORKSPACE_ROLE_OWNER, ipb.WORKSPACE_ROLE_CURATOR)
MEMBERS_PAGE = 100

Handler = Callable[[Request, RestCaller, ipb.Project, dict[str, Any]], Awaitable[Response]]


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(name, reason="malformed")
    return value


def _number(body: dict[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(name, reason="malformed")
    if kind is int and value != int(value):
        raise InvalidInput(name, reason="malformed")
    return kind(value)


async def authorize_curator(backends: Backends, caller: RestCaller, project: str) -> ipb.Project:
    """The shared project, when the caller owns it or owns/curates its workspace.

    A project the caller cannot read is ``project_out_of_scope`` (identity decides, as for
    every other read); a readable one the caller may not curate is ``unauthorized``.
    """
    resolved = (
        await backends.identity.ResolveProject(
            ipb.ResolveProjectRequest(principal_id=caller.principal_id, project=project)
        )
    ).project
    if resolved.kind != ipb.PROJECT_KIND_SHARED:
        raise InvalidInput("project", "only shared projects are curated", reason="not_shared")
    if resolved.owner_principal_id == caller.principal_id:
        return resolved
    if resolved.workspace_id:
        token = ""
        while True:
            page = await backends.identity.ListWorkspaceMembers(
                ipb.ListWorkspaceMembersRequest(
                    actor_principal_id=caller.principal_id,
                    workspace_id=resolved.workspace_id,
                    page_size=MEMBERS_PAGE,
                    page_token=token,
                )
            )
            for member in page.members:
                if member.principal_id == caller.principal_id:
                    if member.role in CURATING_ROLES:
                        return resolved
                    raise Unauthorized(required_role="curator")
            token = page.next_page_token
            if not token:
                break
    raise Unauthorized(required_role="curator")


def _json(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _route(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            backends: Backends = request.app.state.backends
            caller = await request.app.state.authenticator.authenticate(request, backends)
            body = await json_body(request) if request.method == "POST" else {}
            project = await authorize_curator(backends, caller, request.path_params["project"])
            return await handler(request, caller, project, body)
        except VeraError as error:
            response = error_response(error)
            if response.status_code == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="vera-api"'
            return response

    return endpoint


async def list_pending(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    size, token = page_query(request)
    reply = await request.app.state.backends.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(
            scope_id=project.project_id, page_size=size, page_token=token
        )
    )
    return JSONResponse(
        {
            "project_id": project.project_id,
            "proposals": [_json(p) for p in reply.proposals],
            "next_page_token": reply.next_page_token or None,
            "total": reply.total,
        }
    )


async def list_conflicted(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    """Proposals refused because they contradict one of the project's active facts
    (single-valued predicate), newest first, each naming the facts it contradicts."""
    size, token = page_query(request)
    reply = await request.app.state.backends.knowledge.ListConflictedAttempts(
        kpb.ListConflictedAttemptsRequest(
            scope_id=project.project_id, page_size=size, page_token=token
        )
    )
    return JSONResponse(
        {
            "project_id": project.project_id,
            "attempts": [_json(a) for a in reply.attempts],
            "next_page_token": reply.next_page_token or None,
            "total": reply.total,
        }
    )


async def verify(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    only_fields(body, "trust_tier", "authority", "note")
    message = kpb.VerifyProposalRequest(
        curator_principal_id=caller.principal_id,
        scope_id=project.project_id,
        fact_key=request.path_params["fact_key"],
        note=_text(body, "note"),
    )
    tier = _number(body, "trust_tier", int)
    if tier is not None:
        message.trust_tier = tier
    authority = _number(body, "authority", float)
    if authority is not None:
        message.authority = authority
    reply = await request.app.state.backends.knowledge.VerifyProposal(message)
    return JSONResponse(
        {
            "fact": _json(reply.fact),
            "proposal": _json(reply.proposal),
            "already_active": reply.already_active,
            "change_position": reply.change_position,
        }
    )


async def reject(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    only_fields(body, "reason")
    reply = await request.app.state.backends.knowledge.RejectProposal(
        kpb.RejectProposalRequest(
            curator_principal_id=caller.principal_id,
            scope_id=project.project_id,
            fact_key=request.path_params["fact_key"],
            reason=_text(body, "reason"),
        )
    )
    return JSONResponse(
        {"proposal": _json(reply.proposal), "change_position": reply.change_position}
    )


async def retract_source(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    only_fields(body, "reason")
    reply = await request.app.state.backends.knowledge.RetractSource(
        kpb.RetractSourceRequest(
            curator_principal_id=caller.principal_id,
            scope_id=project.project_id,
            source_id=request.path_params["source_id"],
            reason=_text(body, "reason"),
        )
    )
    status = "already_retracted" if reply.status == kpb.RETRACTION_STATUS_ALREADY_RETRACTED \
        else "retracted"
    return JSONResponse(
        {
            "status": status,
            "assertions_withdrawn": reply.assertions_withdrawn,
            "retracted_fact_keys": list(reply.retracted_fact_keys),
            "still_supported_fact_keys": list(reply.still_supported_fact_keys),
            "audit_event_id": reply.audit_event_id or None,
            "change_position": reply.change_position,
        }
    )


_PREFIX = "/curation/projects/{project}"
routes = [
    Route(f"{_PREFIX}/proposals", _route(list_pending), methods=["GET"]),
    Route(f"{_PREFIX}/conflicted-attempts", _route(list_conflicted), methods=["GET"]),
    Route(f"{_PREFIX}/proposals/{{fact_key}}/verify", _route(verify), methods=["POST"]),
    Route(f"{_PREFIX}/proposals/{{fact_key}}/reject", _route(reject), methods=["POST"]),
    Route(f"{_PREFIX}/sources/{{source_id}}/retract", _route(retract_source), methods=["POST"]),
]
