"""Curation routes of the REST API: humans review proposals, retract sources and load
curated records. Each is a translation to the curation layer (``vera.api.curating``),
which the console calls too, after its one permission check.

    GET  /curation/projects/{project}/proposals                pending, paged
    GET  /curation/projects/{project}/conflicted-attempts      refused as conflicted, paged
    POST /curation/projects/{project}/proposals/{fact_key}/verify
    POST /curation/projects/{project}/proposals/{fact_key}/reject
    POST /curation/projects/{project}/sources/{source_id}/retract
    GET  /curation/projects/{project}/sources/{source_id}      one source, or not_found
    POST /curation/projects/{project}/ingest     load curated records (``vera.ingest_records``)
    GET  /curation/projects/{project}/index-status   how far retrieval has indexed changes
    GET  /curation/projects/{project}/changes    the change feed, newest first, paged
    GET  /curation/projects/{project}/settings   curation settings (two-person verification)
    PUT  /curation/projects/{project}/settings   the project's owner changes them
    GET  /curation/projects/{project}/cited-lines   lines facts cite from sources by id prefix
    POST /curation/projects/{project}/drift      mark (or clear) cited lines that changed

Ingesting into a project that does not exist yet creates it when the caller is an
administrator (``ingesting_curator``); in a team deployment projects are created through
their workspace (``POST /identity/workspaces/{id}/projects``) and curators ingest into them.

``project`` is a project id or slug. The bodies and answers are the models below (served
in ``/openapi.json``); errors carry the same stable codes as MCP.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query
from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from vera import limits
from vera.api import curating
from vera.api.curating import ReasonBody, SettingsBody, VerifyBody
from vera.api.models import (
    Actor,
    Change,
    ConflictedAttempt,
    Fact,
    PendingProposal,
    Source,
    SourceFreshness,
    SourceVersion,
    from_proto,
    spelt,
)
from vera.api.requests import ingest_project
from vera.api.routing import (
    AppSettings,
    Caller,
    Page,
    PageQuery,
    RequestBody,
    ResponseBody,
    Services,
    new_router,
)
from vera.errors import InvalidInput, ProjectOutOfScope
from vera.ingest_records import IngestFileError, Record, collect
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends

# Records one ingest request may carry; `vera ingest` sends a file in batches under it
# (and under the ingest route's body limit, ``vera.api.requests``).
MAX_INGEST_RECORDS = 2000

ProjectRef = Annotated[str, Path(min_length=1, max_length=limits.ID_LIKE[1],
                                 description="a project id or slug")]
FactKey = Annotated[str, Path(min_length=1, max_length=limits.ID_LIKE[1])]
SourceId = Annotated[str, Path(min_length=1, max_length=limits.ID_LIKE[1],
                               description="the curator-given source id")]

router = new_router("/curation/projects/{project}", tags=["curation"])


# Bodies --------------------------------------------------------------------------------------


class IngestBody(RequestBody):
    """Curated records in the `vera ingest` format, validated whole before anything is
    written."""

    records: Annotated[list[Record], Field(min_length=1, max_length=MAX_INGEST_RECORDS)]


async def admit_ingest_body(request: Request) -> None:
    """Whether the caller may send an ingest body, from the headers alone, before the body
    is read (``vera.api.requests``): a key, and the right to curate the project (an
    administrator's ingest may create it, which the route does once the body is valid)."""
    project = ingest_project(request.url.path)
    assert project is not None, "only the ingest route takes a large body"
    backends: Backends = request.app.state.backends
    caller = await request.app.state.authenticator.authenticate(request, backends)
    try:
        await curating.curator_of(backends, caller, project)
    except ProjectOutOfScope:
        if not caller.admin:
            raise


# Answers -------------------------------------------------------------------------------------


class ProposalsPage(ResponseBody):
    project_id: str
    proposals: list[PendingProposal]
    next_page_token: str | None
    total: int
    total_is_lower_bound: bool


class ConflictedAttemptsPage(ResponseBody):
    """Proposals refused because they contradict one of the project's active facts
    (single-valued predicate), newest first, each naming the facts it contradicts."""

    project_id: str
    attempts: list[ConflictedAttempt]
    next_page_token: str | None
    total: int
    total_is_lower_bound: bool


class Verified(ResponseBody):
    fact: Fact
    proposal: Fact
    already_active: bool
    change_position: int


class Rejected(ResponseBody):
    proposal: Fact
    change_position: int


class Retracted(ResponseBody):
    status: Literal["retracted", "already_retracted"]
    assertions_withdrawn: int
    retracted_fact_keys: list[str]
    still_supported_fact_keys: list[str]
    audit_event_id: str | None
    change_position: int


class SourceDetail(ResponseBody):
    project_id: str
    source: Source
    scope_id: str
    versions: list[SourceVersion]
    freshness: SourceFreshness | None
    cited_by_facts: int


class Counted(ResponseBody):
    created: int
    deduplicated: int


class Corrections(ResponseBody):
    applied: int
    already_recorded: int


class IngestWarning(ResponseBody):
    """A field knowledge flagged (a hidden character), by the record it came from."""

    record: int | None
    field: str
    reason: str
    codepoint: str


class Ingested(ResponseBody):
    project_id: str
    project_slug: str
    sources: Counted
    entities: Counted
    facts: Counted
    corrections: Corrections
    fact_keys: list[str]
    correction_fact_keys: list[str]
    warnings: list[IngestWarning]
    change_position: int


class IndexStatus(ResponseBody):
    """A load is searchable once ``indexed_position`` reaches its ``change_position``."""

    indexed_position: int


class CurationSettings(ResponseBody):
    """Enforced by knowledge: with two_person_verification, verifying a proposal is
    refused to its proposer (``unauthorized``, reason ``two_person_verification``)."""

    project_id: str
    two_person_verification: bool


class ChangesPage(ResponseBody):
    """Newest first; ``actor`` is null for entries recorded before actors were."""

    project_id: str
    changes: list[Change]
    next_page_token: str | None


# Routes --------------------------------------------------------------------------------------


@router.get("/proposals")
async def list_pending(project: ProjectRef, page: Page, caller: Caller,
                       services: Services) -> ProposalsPage:
    curator = await curating.curator_of(services, caller, project)
    reply = await services.knowledge.ListPendingProposals(kpb.ListPendingProposalsRequest(
        scope_id=curator.project.project_id, page_size=page.page_size,
        page_token=page.page_token))
    return ProposalsPage(
        project_id=curator.project.project_id,
        proposals=[from_proto(PendingProposal, p) for p in reply.proposals],
        next_page_token=reply.next_page_token or None, total=reply.total,
        total_is_lower_bound=reply.total_is_lower_bound)


@router.get("/conflicted-attempts")
async def list_conflicted(project: ProjectRef, page: Page, caller: Caller,
                          services: Services) -> ConflictedAttemptsPage:
    curator = await curating.curator_of(services, caller, project)
    reply = await services.knowledge.ListConflictedAttempts(kpb.ListConflictedAttemptsRequest(
        scope_id=curator.project.project_id, page_size=page.page_size,
        page_token=page.page_token))
    return ConflictedAttemptsPage(
        project_id=curator.project.project_id,
        attempts=[from_proto(ConflictedAttempt, a) for a in reply.attempts],
        next_page_token=reply.next_page_token or None, total=reply.total,
        total_is_lower_bound=reply.total_is_lower_bound)


@router.post("/proposals/{fact_key}/verify", response_model=Verified)
async def verify(project: ProjectRef, fact_key: FactKey, caller: Caller, services: Services,
                 settings: AppSettings, body: VerifyBody | None = None
                 ) -> ResponseBody | Response:
    body = body or VerifyBody()
    curator = await curating.curator_of(services, caller, project)
    reply = await curator.verify(fact_key, body)
    return spelt(from_proto(Verified, reply), settings.api.value_spelling)


@router.post("/proposals/{fact_key}/reject", response_model=Rejected)
async def reject(project: ProjectRef, fact_key: FactKey, body: ReasonBody, caller: Caller,
                 services: Services, settings: AppSettings) -> ResponseBody | Response:
    curator = await curating.curator_of(services, caller, project)
    rejected = from_proto(Rejected, await curator.reject(fact_key, body))
    return spelt(rejected, settings.api.value_spelling)


@router.post("/sources/{source_id}/retract")
async def retract_source(project: ProjectRef, source_id: SourceId, body: ReasonBody,
                         caller: Caller, services: Services) -> Retracted:
    curator = await curating.curator_of(services, caller, project)
    reply = await curator.retract(source_id, body)
    return Retracted(
        status="already_retracted" if reply.status == kpb.RETRACTION_STATUS_ALREADY_RETRACTED
        else "retracted",
        assertions_withdrawn=reply.assertions_withdrawn,
        retracted_fact_keys=list(reply.retracted_fact_keys),
        still_supported_fact_keys=list(reply.still_supported_fact_keys),
        audit_event_id=reply.audit_event_id or None, change_position=reply.change_position)


@router.get("/sources/{source_id}")
async def get_source(project: ProjectRef, source_id: SourceId, caller: Caller,
                     services: Services) -> SourceDetail:
    curator = await curating.curator_of(services, caller, project)
    project_id = curator.project.project_id
    reply = await services.knowledge.GetSource(kpb.GetSourceRequest(
        scope_ids=[project_id], scope_id=project_id, source_id=source_id))
    return from_proto(SourceDetail, reply, project_id=project_id)


@router.post("/ingest")
async def ingest(project: ProjectRef, body: IngestBody, caller: Caller,
                 services: Services) -> Ingested:
    """Loads one batch of curated records as the calling curator; idempotent, so a load
    cut off half-way is finished by sending it again."""
    try:
        parsed = collect(enumerate(body.records))
    except IngestFileError as refused:
        error = refused.record_errors[0]
        name = f"records[{error.position}]" + (f".{error.field}" if error.field else "")
        raise InvalidInput(name, error.message, reason=error.reason) from None
    curator = await curating.ingesting_curator(services, caller, project, parsed)
    outcome = await curator.ingest(parsed)
    return Ingested(
        project_id=curator.project.project_id, project_slug=curator.project.slug,
        **{name: Counted(created=c, deduplicated=d)
           for name, (c, d) in outcome.counts.items()},
        corrections=Corrections(applied=outcome.corrections[0],
                                already_recorded=outcome.corrections[1]),
        fact_keys=outcome.fact_keys, correction_fact_keys=outcome.correction_fact_keys,
        warnings=[IngestWarning(**w) for w in outcome.warnings],
        change_position=outcome.change_position)


@router.get("/index-status")
async def index_status(project: ProjectRef, caller: Caller, services: Services) -> IndexStatus:
    await curating.curator_of(services, caller, project)
    reply = await services.retrieval.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
    return IndexStatus(indexed_position=reply.indexed_position)


@router.get("/changes", response_model=ChangesPage)
async def list_changes(project: ProjectRef, page: Page, caller: Caller, services: Services,
                       settings: AppSettings) -> ResponseBody | Response:
    """The project's change feed, newest first: each entry with the principal whose action
    wrote it (id and display name)."""
    curator = await curating.curator_of(services, caller, project)
    project_id = curator.project.project_id
    reply = await services.knowledge.ListScopeChanges(kpb.ListScopeChangesRequest(
        scope_ids=[project_id], page_size=page.page_size, page_token=page.page_token,
        newest_first=True))
    names = await curating.actor_names(services, (c.actor_principal_id for c in reply.changes))
    changes = [
        from_proto(Change, change, actor=Actor(
            principal_id=change.actor_principal_id,
            display_name=names[change.actor_principal_id],
            handle=curating.principal_handle(change.actor_principal_id))
            if change.actor_principal_id else None)
        for change in reply.changes
    ]
    return spelt(ChangesPage(project_id=project_id, changes=changes,
                             next_page_token=reply.next_page_token if reply.has_more else None),
                 settings.api.value_spelling)


class CitedLinesQuery(PageQuery):
    source_id_prefix: Annotated[str, Field(min_length=1, max_length=limits.ID_LIKE[1])]
    drifted_only: bool = False


class CitedLines(ResponseBody):
    """The lines one current fact cites from one source, and whether they drifted."""

    fact_key: str
    source_id: str
    locator: str
    evidence: str
    subject: str
    predicate: str
    object: str
    drift_reason: str | None
    drift_commit: str | None


class CitedLinesPage(ResponseBody):
    project_id: str
    cited: list[CitedLines]
    next_page_token: str | None


class DriftMark(RequestBody):
    fact_key: Annotated[str, Field(min_length=1, max_length=limits.ID_LIKE[1])]
    source_id: Annotated[str, Field(min_length=1, max_length=limits.ID_LIKE[1])]
    # lines_changed, lines_vanished, or null to clear the mark.
    reason: Literal["lines_changed", "lines_vanished"] | None


class DriftBody(RequestBody):
    commit: Annotated[str, Field(min_length=1, max_length=limits.ID_LIKE[1])]
    drift: Annotated[list[DriftMark], Field(min_length=1, max_length=1000)]


class DriftRecorded(ResponseBody):
    marked: int
    cleared: int


@router.get("/cited-lines")
async def cited_lines(project: ProjectRef, query: Annotated[CitedLinesQuery, Query()],
                      caller: Caller, services: Services) -> CitedLinesPage:
    """What the project's facts cite from sources whose id starts with the prefix (a
    repository's files: ``github.com/acme/shop/``), by source id and fact key; with
    ``drifted_only`` the citations whose lines changed at a later commit."""
    curator = await curating.curator_of(services, caller, project)
    project_id = curator.project.project_id
    reply = await services.knowledge.ListCitedLines(kpb.ListCitedLinesRequest(
        scope_id=project_id, source_id_prefix=query.source_id_prefix,
        drifted_only=query.drifted_only, page_size=query.page_size,
        page_token=query.page_token))
    return CitedLinesPage(
        project_id=project_id, next_page_token=reply.next_page_token or None,
        cited=[CitedLines(fact_key=c.fact_key, source_id=c.source_id, locator=c.locator,
                          evidence=c.evidence, subject=c.subject, predicate=c.predicate,
                          object=c.object, drift_reason=c.drift_reason or None,
                          drift_commit=c.drift_commit or None) for c in reply.cited])


@router.post("/drift")
async def record_drift(project: ProjectRef, body: DriftBody, caller: Caller,
                       services: Services) -> DriftRecorded:
    """Marks cited lines that changed or vanished at ``commit`` (served stale with that
    reason until cleared or corrected); a null reason clears a mark."""
    curator = await curating.curator_of(services, caller, project)
    reply = await services.knowledge.RecordCitationDrift(kpb.RecordCitationDriftRequest(
        curator_principal_id=caller.principal_id, scope_id=curator.project.project_id,
        commit=body.commit,
        drift=[kpb.CitationDrift(fact_key=d.fact_key, source_id=d.source_id,
                                 reason=d.reason or "") for d in body.drift]))
    return DriftRecorded(marked=reply.marked, cleared=reply.cleared)
@router.get("/settings")
async def get_settings(project: ProjectRef, caller: Caller,
                       services: Services) -> CurationSettings:
    curator = await curating.curator_of(services, caller, project)
    settings = await curator.settings()
    return CurationSettings(project_id=curator.project.project_id,
                            two_person_verification=settings.two_person_verification)


@router.put("/settings")
async def put_settings(project: ProjectRef, body: SettingsBody, caller: Caller,
                       services: Services) -> CurationSettings:
    curator = await curating.curator_of(services, caller, project)
    settings = await curator.change_settings(body)
    return CurationSettings(project_id=curator.project.project_id,
                            two_person_verification=settings.two_person_verification)
