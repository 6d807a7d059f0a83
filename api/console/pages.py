"""The console's routes: sign-in and sign-out, then per project the review queue, bulk
review of harvested proposals, the sources, the change feed and what an agent would be
served; for administrators, the audit trail.

Every project page and action goes through the curation layer the REST routes call
(``vera.api.curating``): its one permission check (``curator_of``), so a project the caller
may not curate is refused exactly as on ``/curation/...``, and its decisions, each form read
as the route's declared body, with the session's principal as the curator, so it lands in
the change log and audit events as ``vera curate`` does. Forms post back and are
answered with a redirect (303) to the page they came from, so reloading never repeats one.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles

from vera.api.audit import AUDITED_SERVICES, AuditQuery, read_audit
from vera.api.auth import LocalDevRestAuthenticator, RestCaller, api_key_caller
from vera.api.console import agent_preview, sessions, views
from vera.api.console.security import ConsoleHeaders, CsrfRefused, form_fields, require_csrf
from vera.api.console.sessions import Session, SessionStore, cookie_secure
from vera.api.console.templates import render
from vera.api.curating import (
    Curator,
    ReasonBody,
    SettingsBody,
    VerifyBody,
    actor_names,
    curator_of,
)
from vera.api.errors import HTTP_STATUS, tally_refusal
from vera.config import Settings
from vera.errors import InvalidInput, Unauthenticated, Unauthorized, VeraError
from vera.identity.v1 import identity_pb2 as ipb
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends

QUEUE_PAGE = 50
# Bulk review's page: the most ListPendingProposals answers, and a group decision takes.
HARVEST_PAGE = 100
CONFLICTED_PAGE = 20
CHANGES_PAGE = 50
AUDIT_PAGE = 50
# Projects listed on the start page, each checked and counted with its own RPCs.
PROJECTS_SHOWN = 50
# The pre-session cookie that ties the sign-in form to the browser that loaded it.
SIGN_IN_COOKIE = "vera_console_sign_in"
# Outcomes named in a redirect's query; the page words them.
DONE = frozenset({"verified", "rejected", "retracted", "already_retracted", "settings"})

ProjectPage = Callable[[Request, Session, Curator], Awaitable[Response]]


def _backends(request: Request) -> Backends:
    return request.app.state.backends


def _page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    return render(request, template, status, **context)


def _see_other(url: str) -> Response:
    return RedirectResponse(url, status_code=303)


def _error_page(request: Request, error: VeraError, session: Session | None) -> Response:
    tally_refusal(request.app.state.refusals, error)
    status = HTTP_STATUS.get(error.reason, 500)
    code = error.reason.lower() if status != 500 else "internal_error"
    return _page(request, "error.html", status, code=code,
                 reason=error.metadata.get("reason", "") if status != 500 else "",
                 session=session)


def _project_url(project_id: str, page: str = "") -> str:
    return f"/console/projects/{quote(project_id, safe='')}/{page}"


# Sign-in -----------------------------------------------------------------------------------


def _local_dev(request: Request) -> bool:
    settings: Settings = request.app.state.settings
    return settings.auth_profile == "local-dev"


def _signed_in(request: Request, caller: RestCaller) -> Response:
    store: SessionStore = request.app.state.console_sessions
    session_id, _ = store.start(caller)
    response = _see_other("/console/")
    sessions.set_session_cookie(response, request, session_id)
    response.delete_cookie(SIGN_IN_COOKIE, path="/console/", httponly=True, samesite="strict",
                           secure=cookie_secure(request))
    return response


async def sign_in_form(request: Request) -> Response:
    """The API key form; in local-dev, the one-time token of ``console_url`` instead."""
    if _local_dev(request):
        token = request.query_params.get("token")
        if token is not None:
            return await _local_sign_in(request, token)
        return _page(request, "sign_in.html", local=True, failed=False)
    nonce = secrets.token_urlsafe(32)
    response = _page(request, "sign_in.html", local=False, failed=False, nonce=nonce)
    response.set_cookie(SIGN_IN_COOKIE, nonce, path="/console/", httponly=True,
                        samesite="strict", secure=cookie_secure(request))
    return response


async def _local_sign_in(request: Request, token: str) -> Response:
    """Spends the one-time token: the first browser to open the URL is signed in as the
    local principal; every later use, and any other token, is refused."""
    expected: str | None = request.app.state.console_sign_in_token
    if expected is None or not secrets.compare_digest(token.encode(), expected.encode()):
        return _page(request, "sign_in.html", 401, local=True, failed=True)
    request.app.state.console_sign_in_token = None
    local = LocalDevRestAuthenticator(request.app.state.settings)
    return _signed_in(request, await local.local_caller(_backends(request)))


async def sign_in(request: Request) -> Response:
    if _local_dev(request):
        return _page(request, "sign_in.html", 403, local=True, failed=True)
    fields = await form_fields(request)
    nonce = request.cookies.get(SIGN_IN_COOKIE, "")
    sent = fields.get("nonce", "")
    if not nonce or not secrets.compare_digest(nonce.encode(), sent.encode()):
        return _page(request, "error.html", 403, code="csrf", session=None)
    try:
        caller = await api_key_caller(_backends(request), fields.get("api_key") or None)
    except Unauthenticated:
        nonce = secrets.token_urlsafe(32)
        response = _page(request, "sign_in.html", 401, local=False, failed=True, nonce=nonce)
        response.set_cookie(SIGN_IN_COOKIE, nonce, path="/console/", httponly=True,
                            samesite="strict", secure=cookie_secure(request))
        return response
    return _signed_in(request, caller)


async def sign_out(request: Request) -> Response:
    fields = await form_fields(request)
    try:
        require_csrf(sessions.session_of(request), fields)
    except CsrfRefused:
        return _page(request, "error.html", 403, code="csrf", session=None)
    request.app.state.console_sessions.end(request.cookies.get(sessions.COOKIE))
    response = _see_other("/console/sign-in")
    sessions.clear_session_cookie(response, request)
    return response


# Pages ---------------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    """The projects the caller curates, with their pending and conflicted counts."""
    session = sessions.session_of(request)
    if session is None:
        return _see_other("/console/sign-in")
    backends = _backends(request)
    caller = session.caller
    try:
        scopes = await backends.identity.ResolveScopes(
            ipb.ResolveScopesRequest(principal_id=caller.principal_id))
        projects = []
        for candidate in list(scopes.projects)[:PROJECTS_SHOWN]:
            if candidate.kind != ipb.PROJECT_KIND_SHARED:
                continue
            try:
                project = (await curator_of(backends, caller, candidate.project_id)).project
            except VeraError:
                continue  # readable, not curated by the caller: not listed
            projects.append((project, await views.counts(backends, project.project_id)))
    except VeraError as error:
        return _error_page(request, error, session)
    return _page(request, "projects.html", session=session, projects=projects)


def _project_page(page: ProjectPage) -> Callable[[Request], Awaitable[Response]]:
    """A GET page of one project the session's principal curates."""

    async def endpoint(request: Request) -> Response:
        session = sessions.session_of(request)
        if session is None:
            return _see_other("/console/sign-in")
        try:
            curator = await curator_of(
                _backends(request), session.caller, request.path_params["project"])
            return await page(request, session, curator)
        except VeraError as error:
            return _error_page(request, error, session)

    return endpoint


def _project_action(
    action: Callable[[Request, Curator, dict[str, str]], Awaitable[str]],
) -> Callable[[Request], Awaitable[Response]]:
    """A form post on one project: session and CSRF token first, then the curator check,
    then the action, answered with a redirect to the URL it returns."""

    async def endpoint(request: Request) -> Response:
        session: Session | None = None
        try:
            fields = await form_fields(request)
            session = require_csrf(sessions.session_of(request), fields)
            curator = await curator_of(
                _backends(request), session.caller, request.path_params["project"])
            return _see_other(await action(request, curator, fields))
        except CsrfRefused:
            return _page(request, "error.html", 403, code="csrf", session=None)
        except VeraError as error:
            return _error_page(request, error, session)

    return endpoint


async def queue(request: Request, session: Session, curator: Curator) -> Response:
    backends, project = curator.backends, curator.project
    pending = await backends.knowledge.ListPendingProposals(kpb.ListPendingProposalsRequest(
        scope_id=project.project_id, page_size=QUEUE_PAGE,
        page_token=request.query_params.get("page_token", "")))
    conflicted = await backends.knowledge.ListConflictedAttempts(
        kpb.ListConflictedAttemptsRequest(
            scope_id=project.project_id, page_size=CONFLICTED_PAGE,
            page_token=request.query_params.get("conflicted_page_token", "")))
    keys = {k for p in pending.proposals for k in (*p.conflicting_fact_keys, p.known_fact_key)}
    keys |= {k for a in conflicted.attempts for k in a.contradicted_fact_keys}
    facts = await views.facts_by_key(backends, project.project_id, keys)
    done = request.query_params.get("done")
    return _page(
        request, "queue.html", session=session, project=project,
        settings=await curator.settings(),
        owner=project.owner_principal_id == session.caller.principal_id,
        pending=pending, conflicted=conflicted, facts=facts,
        done=done if done in DONE else None, tiers=views.HUMAN_TIERS,
        next_url=_next_page_url(request, "page_token", pending.next_page_token),
        conflicted_next_url=_next_page_url(
            request, "conflicted_page_token", conflicted.next_page_token),
    )


def _next_page_url(request: Request, name: str, token: str) -> str | None:
    if not token:
        return None
    query = dict(request.query_params)
    query.pop("done", None)
    query[name] = token
    return f"{request.url.path}?{urlencode(query)}"


async def verify(request: Request, curator: Curator, fields: dict[str, str]) -> str:
    await curator.verify(request.path_params["fact_key"], views.form_body(VerifyBody, fields))
    return _project_url(curator.project.project_id) + "?done=verified"


async def change_settings(request: Request, curator: Curator, fields: dict[str, str]) -> str:
    """The owner's switch: the form posts the setting it wants ("on" or "off")."""
    wanted = fields.get("two_person_verification")
    if wanted not in ("on", "off"):
        raise InvalidInput("two_person_verification", reason="malformed")
    await curator.change_settings(SettingsBody(two_person_verification=wanted == "on"))
    return _project_url(curator.project.project_id) + "?done=settings"


async def reject(request: Request, curator: Curator, fields: dict[str, str]) -> str:
    await curator.reject(request.path_params["fact_key"], views.form_body(ReasonBody, fields))
    return _project_url(curator.project.project_id) + "?done=rejected"


async def harvests(request: Request, session: Session, curator: Curator) -> Response:
    """Bulk review: a page of pending proposals grouped by harvest and by file, each with
    its evidence lines, a group decided at once."""
    project = curator.project
    pending = await curator.backends.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(
            scope_id=project.project_id, page_size=HARVEST_PAGE,
            page_token=request.query_params.get("page_token", "")))
    groups, uncited = views.harvest_groups(pending.proposals)
    done = request.query_params.get("done")
    return _page(request, "harvests.html", session=session, project=project, pending=pending,
                 harvests=groups, uncited=uncited, done=done if done in DONE else None,
                 tiers=views.HUMAN_TIERS,
                 next_url=_next_page_url(request, "page_token", pending.next_page_token))


async def verify_group(request: Request, curator: Curator, fields: dict[str, str]) -> str:
    await curator.verify_group(views.group_keys(fields), views.form_body(VerifyBody, fields))
    return _project_url(curator.project.project_id, "harvests") + "?done=verified"


async def reject_group(request: Request, curator: Curator, fields: dict[str, str]) -> str:
    await curator.reject_group(views.group_keys(fields), views.form_body(ReasonBody, fields))
    return _project_url(curator.project.project_id, "harvests") + "?done=rejected"


async def sources(request: Request, session: Session, curator: Curator) -> Response:
    project = curator.project
    reply = await curator.backends.knowledge.ListSources(kpb.ListSourcesRequest(
        scope_id=project.project_id, page_size=QUEUE_PAGE,
        page_token=request.query_params.get("page_token", "")))
    done = request.query_params.get("done")
    return _page(request, "sources.html", session=session, project=project, sources=reply,
                 done=done if done in DONE else None,
                 next_url=_next_page_url(request, "page_token", reply.next_page_token))


async def retract_preview(request: Request, session: Session, curator: Curator) -> Response:
    """What retracting the source would do, written nowhere, with the form that does it."""
    project = curator.project
    source_id = request.path_params["source_id"]
    preview = await curator.preview_retraction(source_id)
    facts = await views.facts_by_key(
        curator.backends, project.project_id,
        [*preview.retracted_fact_keys, *preview.still_supported_fact_keys])
    already = preview.status == kpb.RETRACTION_STATUS_ALREADY_RETRACTED
    return _page(request, "retract.html", session=session, project=project,
                 source_id=source_id, preview=preview, facts=facts, already=already)


async def retract(request: Request, curator: Curator, fields: dict[str, str]) -> str:
    reply = await curator.retract(request.path_params["source_id"],
                                  views.form_body(ReasonBody, fields))
    outcome = "already_retracted" if reply.status == kpb.RETRACTION_STATUS_ALREADY_RETRACTED \
        else "retracted"
    return _project_url(curator.project.project_id, "sources") + f"?done={outcome}"


async def preview(request: Request, session: Session, curator: Curator) -> Response:
    """Type a task, see what knowledge_get_context serves an agent for it in this project."""
    project = curator.project
    task = request.query_params.get("task", "")
    served = None
    if task:
        served = await agent_preview.served_context(
            request.app.state.settings, session.caller, project.project_id, task)
    return _page(request, "preview.html", session=session, project=project, task=task,
                 served=served)


MEMBERS_PAGE = 100
_ROLE_LABELS = {ipb.WORKSPACE_ROLE_OWNER: "owner", ipb.WORKSPACE_ROLE_CURATOR: "curator",
                ipb.WORKSPACE_ROLE_MEMBER: "member"}


async def members(request: Request, session: Session, curator: Curator) -> Response:
    """Who is in the project's workspace, with their roles: for its owners (and
    administrators), who decide who joins and leaves."""
    project, caller = curator.project, session.caller
    if not project.workspace_id:
        return _page(request, "members.html", session=session, project=project, members=[],
                     next_url=None)
    reply = await curator.backends.identity.ListWorkspaceMembers(
        ipb.ListWorkspaceMembersRequest(
            actor_principal_id=caller.principal_id, workspace_id=project.workspace_id,
            page_size=MEMBERS_PAGE, page_token=request.query_params.get("page_token", "")))
    roles = {m.principal_id: m.role for m in reply.members}
    if not caller.admin and roles.get(caller.principal_id) != ipb.WORKSPACE_ROLE_OWNER:
        raise Unauthorized()
    shown = [(m.display_name, m.principal_id, _ROLE_LABELS[m.role]) for m in reply.members]
    return _page(request, "members.html", session=session, project=project, members=shown,
                 next_url=_next_page_url(request, "page_token", reply.next_page_token))


async def changes(request: Request, session: Session, curator: Curator) -> Response:
    project = curator.project
    reply = await _backends(request).knowledge.ListScopeChanges(kpb.ListScopeChangesRequest(
        scope_ids=[project.project_id], page_size=CHANGES_PAGE, newest_first=True,
        page_token=request.query_params.get("page_token", "")))
    next_url = _next_page_url(request, "page_token", reply.next_page_token) \
        if reply.has_more else None
    actors = await actor_names(_backends(request), (c.actor_principal_id for c in reply.changes))
    return _page(request, "changes.html", session=session, project=project,
                 changes=reply.changes, actors=actors, next_url=next_url)


async def audit_trail(request: Request) -> Response:
    """Administrators only: a service's audit records, oldest first, a page at a time,
    filtered by action (the REST route's ``read_audit``)."""
    session = sessions.session_of(request)
    if session is None:
        return _see_other("/console/sign-in")
    try:
        service = request.path_params["service"]
        if service not in AUDITED_SERVICES:
            raise InvalidInput("service", reason="not_allowed")
        fields = {name: request.query_params.get(name, "") for name in ("after_seq", "action")}
        query = views.form_body(AuditQuery, fields).model_copy(update={"page_size": AUDIT_PAGE})
        page = await read_audit(_backends(request), session.caller, service, query)
    except VeraError as error:
        return _error_page(request, error, session)
    next_url = None if page.next_after_seq is None else \
        _next_page_url(request, "after_seq", str(page.next_after_seq))
    return _page(request, "audit.html", session=session, service=service,
                 services=AUDITED_SERVICES, action=query.action, page=page, next_url=next_url)


routes: list[Route | Mount] = [
    Route("/", home, methods=["GET"]),
    Route("/sign-in", sign_in_form, methods=["GET"]),
    Route("/sign-in", sign_in, methods=["POST"]),
    Route("/sign-out", sign_out, methods=["POST"]),
    Route("/audit/{service}", audit_trail, methods=["GET"]),
    Route("/projects/{project}/", _project_page(queue), methods=["GET"]),
    Route("/projects/{project}/harvests", _project_page(harvests), methods=["GET"]),
    Route("/projects/{project}/harvests/verify", _project_action(verify_group),
          methods=["POST"]),
    Route("/projects/{project}/harvests/reject", _project_action(reject_group),
          methods=["POST"]),
    Route("/projects/{project}/changes", _project_page(changes), methods=["GET"]),
    Route("/projects/{project}/sources", _project_page(sources), methods=["GET"]),
    Route("/projects/{project}/preview", _project_page(preview), methods=["GET"]),
    Route("/projects/{project}/members", _project_page(members), methods=["GET"]),
    # A source id may hold "/": the links carry it encoded as one segment (``segment``).
    Route("/projects/{project}/sources/{source_id:path}/retract",
          _project_page(retract_preview), methods=["GET"]),
    Route("/projects/{project}/sources/{source_id:path}/retract", _project_action(retract),
          methods=["POST"]),
    Route("/projects/{project}/proposals/{fact_key}/verify", _project_action(verify),
          methods=["POST"]),
    Route("/projects/{project}/settings", _project_action(change_settings), methods=["POST"]),
    Route("/projects/{project}/proposals/{fact_key}/reject", _project_action(reject),
          methods=["POST"]),
    Mount("/static", StaticFiles(packages=[("vera.api.console", "static")])),
]


def console_mount() -> Mount:
    """``/console``: every route above, each response with the console's headers."""
    return Mount("/console", app=ConsoleHeaders(Router(routes=routes)))
