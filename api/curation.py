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
    GET  /curation/projects/{project}/sources/{source_id}            one source, or not_found
    POST /curation/projects/{project}/ingest    {records: [...]}  load curated records (the
                                                `vera ingest` format, ``vera.ingest_records``)
    GET  /curation/projects/{project}/index-status   how far retrieval has indexed changes
    GET  /curation/projects/{project}/changes   the change feed, newest first, paged: who
                                                changed what, when

Ingesting into a project that does not exist yet creates it when the caller is an
administrator (the local-dev caller always is), so `vera ingest` on a laptop needs no setup;
in a team deployment projects are created through their workspace
(``POST /identity/workspaces/{id}/projects``) and curators ingest into them.

``project`` is a project id or slug. Errors carry the same stable codes as MCP.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from vera.api.auth import RestCaller
from vera.api.errors import error_response
from vera.api.requests import ingest_project, json_body, only_fields, page_query
from vera.errors import InvalidInput, ProjectOutOfScope, VeraError
from vera.identity.v1 import identity_pb2 as ipb
from vera.ingest_records import FACTS_PER_CALL, IngestFileError, ParsedFile, parse_records
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends

# Records one ingest request may carry; `vera ingest` sends a file in batches under it
# (and under the ingest route's body limit, ``vera.api.requests``).
MAX_INGEST_RECORDS = 2000
# IngestKnowledge writes a batch in one transaction: give it longer than a read.
INGEST_CALL_SECONDS = 120.0

Handler = Callable[[Request, RestCaller, ipb.Project, dict[str, Any]], Awaitable[Response]]
Authorize = Callable[[Backends, RestCaller, str], Awaitable[ipb.Project]]


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
    """The shared project, when the caller curates it (identity's rule, ``AuthorizeCurator``:
    owner, or owner/curator of its workspace). Unreadable is ``project_out_of_scope``;
    readable but not curated is ``unauthorized``."""
    return (
        await backends.identity.AuthorizeCurator(
            ipb.AuthorizeCuratorRequest(principal_id=caller.principal_id, project=project)
        )
    ).project


async def authorize_ingest(backends: Backends, caller: RestCaller, project: str) -> ipb.Project:
    """``authorize_curator``; an administrator's ingest into a slug no project holds yet
    creates the project, owned by the administrator."""
    try:
        return await authorize_curator(backends, caller, project)
    except ProjectOutOfScope:
        if not caller.admin:
            raise
    await backends.identity.EnsureProject(
        ipb.EnsureProjectRequest(principal_id=caller.principal_id, slug=project)
    )
    return await authorize_curator(backends, caller, project)


async def admit_ingest_body(request: Request) -> None:
    """Whether the caller may send an ingest body, from the headers alone, before the body
    is read (``vera.api.requests``): a key, and the right to curate the project (an
    administrator's ingest may create it, which the route does once the body is valid)."""
    project = ingest_project(request.url.path)
    assert project is not None, "only the ingest route takes a large body"
    backends: Backends = request.app.state.backends
    caller = await request.app.state.authenticator.authenticate(request, backends)
    try:
        await authorize_curator(backends, caller, project)
    except ProjectOutOfScope:
        if not caller.admin:
            raise


def _json(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _route(
    handler: Handler, authorize: Authorize = authorize_curator
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            backends: Backends = request.app.state.backends
            caller = await request.app.state.authenticator.authenticate(request, backends)
            body = await json_body(request) if request.method == "POST" else {}
            project = await authorize(backends, caller, request.path_params["project"])
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
            "total_is_lower_bound": reply.total_is_lower_bound,
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
            "total_is_lower_bound": reply.total_is_lower_bound,
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


async def get_source(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    reply = await request.app.state.backends.knowledge.GetSource(
        kpb.GetSourceRequest(
            scope_ids=[project.project_id], scope_id=project.project_id,
            source_id=request.path_params["source_id"],
        )
    )
    return JSONResponse({**_json(reply), "project_id": project.project_id})


def _records(body: dict[str, Any]) -> ParsedFile:
    only_fields(body, "records")
    records = body.get("records")
    if not isinstance(records, list) or not records:
        raise InvalidInput("records", "a non-empty list of records", reason="required")
    if len(records) > MAX_INGEST_RECORDS:
        raise InvalidInput("records", f"at most {MAX_INGEST_RECORDS} per request",
                           reason="too_many")
    try:
        return parse_records(enumerate(records))
    except IngestFileError as refused:
        index, detail = refused.errors[0]
        raise InvalidInput(f"records[{index}]", f"records[{index}]: {detail}",
                           reason="invalid_record", index=index, detail=detail) from None


async def ingest(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    """Loads one batch of curated records as the calling curator: repositories mapped to
    the project, then sources, entities and facts, then corrections. Idempotent: a batch
    sent again creates nothing, so a load cut off half-way is finished by sending it again."""
    parsed = _records(body)
    backends: Backends = request.app.state.backends
    await _check_whole(backends, caller, project, parsed)
    for repository in sorted(parsed.repositories):
        await backends.identity.MapRepository(ipb.MapRepositoryRequest(
            principal_id=caller.principal_id, project_id=project.project_id,
            repository=repository))
    counts = {"sources": [0, 0], "entities": [0, 0], "facts": [0, 0]}
    fact_keys: list[str] = []
    warnings: list[dict[str, Any]] = []
    position = 0
    chunks = [parsed.facts[i:i + FACTS_PER_CALL]
              for i in range(0, len(parsed.facts), FACTS_PER_CALL)] or [[]]
    for number, chunk in enumerate(chunks):
        first = number * FACTS_PER_CALL
        reply = await backends.knowledge.IngestKnowledge(
            kpb.IngestKnowledgeRequest(
                principal_id=caller.principal_id, scope_id=project.project_id, facts=chunk,
                # Sources and entities ride with the first call so later facts can cite them.
                sources=parsed.sources if number == 0 else [],
                entities=parsed.entities if number == 0 else [],
            ),
            timeout=INGEST_CALL_SECONDS,
        )
        for name, pair in counts.items():
            pair[0] += getattr(reply, name).created
            pair[1] += getattr(reply, name).deduplicated
        fact_keys += reply.fact_keys
        warnings += [_warning(w, parsed.fact_lines, first) for w in reply.warnings]
        position = max(position, reply.change_position)
    corrections = [0, 0]
    replacement_keys: list[str] = []
    for corrects, replacement, reason in parsed.corrections:
        corrected = await backends.knowledge.CorrectFact(kpb.CorrectFactRequest(
            principal_id=caller.principal_id, scope_id=project.project_id,
            fact_key=corrects, replacement=replacement, reason=reason))
        corrections[0 if corrected.created else 1] += 1
        replacement_keys.append(corrected.replacement.fact_key)
        position = max(position, corrected.change_position)
    return JSONResponse({
        "project_id": project.project_id,
        "project_slug": project.slug,
        **{name: {"created": c, "deduplicated": d} for name, (c, d) in counts.items()},
        "corrections": {"applied": corrections[0], "already_recorded": corrections[1]},
        "fact_keys": fact_keys,
        "correction_fact_keys": replacement_keys,
        "warnings": warnings,
        "change_position": position,
    })


async def _check_whole(backends: Backends, caller: RestCaller, project: ipb.Project,
                       parsed: ParsedFile) -> None:
    """The request, checked whole by knowledge before its first write (repository mappings,
    then facts in several calls, then corrections), so that a refused request writes
    nothing; a refusal names the record (``records[i]``)."""
    try:
        await backends.knowledge.IngestKnowledge(
            kpb.IngestKnowledgeRequest(
                principal_id=caller.principal_id, scope_id=project.project_id,
                sources=parsed.sources, entities=parsed.entities,
                facts=[*parsed.facts, *(replacement for _, replacement, _ in parsed.corrections)],
                validate_only=True,
                corrected_fact_keys=[corrects for corrects, _, _ in parsed.corrections]),
            timeout=INGEST_CALL_SECONDS)
    except InvalidInput as refused:
        raise _naming_record(refused, parsed) from None


_CHECKED_FIELD = re.compile(r"^(facts|corrected_fact_keys)\[(\d+)\]")


def _naming_record(refused: InvalidInput, parsed: ParsedFile) -> InvalidInput:
    """``refused`` with its field the record it came from: the check's facts are the
    file's facts, then its corrections' replacements."""
    match = _CHECKED_FIELD.match(refused.field)
    if match is None:
        return refused
    index = int(match[2])
    if match[1] == "facts" and index < len(parsed.facts):
        line = parsed.fact_lines[index]
    else:
        index -= len(parsed.facts) if match[1] == "facts" else 0
        if not 0 <= index < len(parsed.correction_lines):
            return refused
        line = parsed.correction_lines[index]
    detail = refused.field[match.end():].lstrip(".")
    return InvalidInput(f"records[{line}]", refused.message, reason="invalid_record",
                        index=line, detail=f"{detail or 'record'}: "
                        f"{refused.metadata.get('reason', 'invalid')}")


def _warning(warning: kpb.IngestWarning, fact_records: list[int], first: int) -> dict[str, Any]:
    """A flagged field by the record it came from (a fact's by its record index)."""
    record, _, name = warning.field.partition("].")
    if record.startswith("facts["):
        index = fact_records[first + int(record.removeprefix("facts["))]
        return {"record": index, "field": name, "reason": warning.reason,
                "codepoint": warning.codepoint}
    return {"record": None, "field": warning.field, "reason": warning.reason,
            "codepoint": warning.codepoint}


async def actor_names(backends: Backends, principal_ids: Iterable[str]) -> dict[str, str]:
    """Display names of the principals whose actions a curator reads about (the change
    feed's actors), one lookup each; a principal identity no longer knows has none."""
    names = {}
    for principal_id in sorted({p for p in principal_ids if p}):
        try:
            reply = await backends.identity.GetPrincipal(
                ipb.GetPrincipalRequest(principal_id=principal_id))
        except InvalidInput:
            names[principal_id] = ""
            continue
        names[principal_id] = reply.principal.display_name
    return names


async def list_changes(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    """The project's change feed, newest first: each entry with the principal whose action
    wrote it (``actor``: id and display name; null for entries recorded before actors
    were)."""
    size, token = page_query(request)
    backends: Backends = request.app.state.backends
    reply = await backends.knowledge.ListScopeChanges(kpb.ListScopeChangesRequest(
        scope_ids=[project.project_id], page_size=size, page_token=token, newest_first=True))
    names = await actor_names(backends, (c.actor_principal_id for c in reply.changes))
    changes = []
    for change in reply.changes:
        entry = _json(change)
        actor = entry.pop("actor_principal_id", "")
        entry["actor"] = {"principal_id": actor, "display_name": names[actor]} if actor else None
        changes.append(entry)
    return JSONResponse({
        "project_id": project.project_id,
        "changes": changes,
        "next_page_token": reply.next_page_token if reply.has_more else None,
    })


async def index_status(
    request: Request, caller: RestCaller, project: ipb.Project, body: dict[str, Any]
) -> Response:
    """How far retrieval has indexed the change log: a load is searchable once
    ``indexed_position`` reaches the ``change_position`` its ingest answered."""
    reply = await request.app.state.backends.retrieval.GetIndexStatus(
        retrieval_pb2.GetIndexStatusRequest())
    return JSONResponse({"indexed_position": reply.indexed_position})


_PREFIX = "/curation/projects/{project}"
routes = [
    Route(f"{_PREFIX}/proposals", _route(list_pending), methods=["GET"]),
    Route(f"{_PREFIX}/conflicted-attempts", _route(list_conflicted), methods=["GET"]),
    Route(f"{_PREFIX}/proposals/{{fact_key}}/verify", _route(verify), methods=["POST"]),
    Route(f"{_PREFIX}/proposals/{{fact_key}}/reject", _route(reject), methods=["POST"]),
    Route(f"{_PREFIX}/sources/{{source_id}}/retract", _route(retract_source), methods=["POST"]),
    Route(f"{_PREFIX}/sources/{{source_id}}", _route(get_source), methods=["GET"]),
    Route(f"{_PREFIX}/ingest", _route(ingest, authorize_ingest), methods=["POST"]),
    Route(f"{_PREFIX}/index-status", _route(index_status), methods=["GET"]),
    Route(f"{_PREFIX}/changes", _route(list_changes), methods=["GET"]),
]
