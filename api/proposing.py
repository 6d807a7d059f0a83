"""Proposal routes of the REST API: a project's members file facts for its curators.

    POST /projects/{project}/proposals   a batch of sourced facts proposed for review

The batch is `vera harvest`'s (sources and facts in the `vera ingest` record format): a
harvest is not an agent's task, so the MCP tool's per-task cap does not apply; it is
bounded per request instead (``MAX_PROPOSAL_RECORDS`` and the request body limit). Each
fact becomes a proposal in the caller's personal scope addressed to the project, keeping
its source, locator, evidence, valid time and code binding through verification
(knowledge's ``ProposeFacts``); a predicate the ontology lacks is named in the answer and
its facts left out.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from vera.api.curation import ProjectRef
from vera.api.routing import Caller, RequestBody, ResponseBody, Services, new_router
from vera.errors import InvalidInput, ProjectOutOfScope
from vera.identity.v1 import identity_pb2 as ipb
from vera.ingest_records import IngestFileError, Record, collect
from vera.knowledge.v1 import knowledge_service_pb2 as kpb

MAX_PROPOSAL_RECORDS = 1000

router = new_router("/projects/{project}", tags=["proposals"])


class ProposalsBody(RequestBody):
    """Sources and facts in the `vera ingest` record format (no entities, no corrections:
    a proposal states, a curator corrects)."""

    records: Annotated[list[Record], Field(min_length=1, max_length=MAX_PROPOSAL_RECORDS)]


class Proposed(ResponseBody):
    """``fact_keys`` follow the fact records in order; empty for a fact left out."""

    project_id: str
    fact_keys: list[str]
    created: int
    deduplicated: int
    unknown_predicates: list[str]
    change_position: int


@router.post("/proposals")
async def propose(project: ProjectRef, body: ProposalsBody, caller: Caller,
                  services: Services) -> Proposed:
    try:
        parsed = collect(enumerate(body.records))
    except IngestFileError as refused:
        error = refused.record_errors[0]
        name = f"records[{error.position}]" + (f".{error.field}" if error.field else "")
        raise InvalidInput(name, error.message, reason=error.reason) from None
    if parsed.entities or parsed.corrections:
        raise InvalidInput("records", "sources and facts only", reason="invalid")
    scopes = await services.identity.ResolveScopes(
        ipb.ResolveScopesRequest(principal_id=caller.principal_id))
    target = (await services.identity.ResolveProject(ipb.ResolveProjectRequest(
        principal_id=caller.principal_id, project=project))).project
    if target.project_id == scopes.personal_scope_id:
        raise ProjectOutOfScope()  # proposals are for a shared project's curators
    reply = await services.knowledge.ProposeFacts(kpb.ProposeFactsRequest(
        principal_id=caller.principal_id, personal_scope_id=scopes.personal_scope_id,
        target_scope_id=target.project_id, sources=parsed.sources, facts=parsed.facts))
    return Proposed(project_id=target.project_id, fact_keys=list(reply.fact_keys),
                    created=reply.created, deduplicated=reply.deduplicated,
                    unknown_predicates=list(reply.unknown_predicates),
                    change_position=reply.change_position)
