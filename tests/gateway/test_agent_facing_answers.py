"""What an agent reads back, through the real MCP client, gateway and knowledge service on
PostgreSQL (identity is a small stand-in that grants two UUID scopes): the proposal report
explains refused, verified and conflicted attempts; a corrected key leads to its
replacement; a refused argument's message names its field and reason; the allowed
predicates are discoverable; and a source is refreshed without duplicating it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import gateway_over_knowledge, mcp_client, without_ids
from mcp.shared.exceptions import MCPError

from vera.config import KnowledgeSettings
from vera.gateway.profiles import tools_for_profile
from vera.gateway.schemas import FRESHNESS_NOTE, TRUST_TIER_NOTE
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.services.knowledge.domain import fact_key, load_ontology

PROJECT = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())
CURATOR = str(uuid.uuid4())
TASK = {"runtime": "claude-code", "task_ref": "t-edges"}

_PROJECTS = [
    identity_pb2.Project(project_id=PERSONAL, slug="me", kind=identity_pb2.PROJECT_KIND_PERSONAL),
    identity_pb2.Project(project_id=PROJECT, slug="acme", kind=identity_pb2.PROJECT_KIND_SHARED),
]


class Identity(identity_pb2_grpc.IdentityServiceServicer):
    async def EnsureLocalPrincipal(self, request, context):
        return identity_pb2.EnsureLocalPrincipalResponse(
            principal=identity_pb2.Principal(
                principal_id=request.principal_id, personal_scope_id=PERSONAL
            )
        )

    async def ResolveScopes(self, request, context):
        return identity_pb2.ResolveScopesResponse(personal_scope_id=PERSONAL, projects=_PROJECTS)

    async def ResolveProject(self, request, context):
        found = next(p for p in _PROJECTS if request.project in (p.slug, p.project_id))
        return identity_pb2.ResolveProjectResponse(project=found)

    async def ResolveRepository(self, request, context):
        return identity_pb2.ResolveRepositoryResponse(
            resolution=identity_pb2.REPOSITORY_RESOLUTION_UNMAPPED
        )


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def source(observed_at: datetime | None = None, title: str = "ADR 7") -> pb.SourceInput:
    return pb.SourceInput(
        source_id="adr-7",
        source_type="adr",
        title=title,
        uri="https://docs/adr-7",
        observed_at=ts(observed_at) if observed_at is not None else None,
    )


def fact(subject: str, predicate: str, object_: str, **kw: Any) -> pb.FactInput:
    return pb.FactInput(
        subject=subject,
        predicate=predicate,
        object=object_,
        source_id="adr-7",
        evidence=f"{subject} {predicate} {object_}",
        locator="L1",
        **kw,
    )


@dataclass
class Answer:
    data: dict[str, Any]
    text: str


class World:
    def __init__(self, url: str, knowledge: knowledge_pb2_grpc.KnowledgeServiceStub) -> None:
        self.url = url
        self.knowledge = knowledge

    async def ingest(self, *, sources=(), facts=()) -> pb.IngestKnowledgeResponse:
        return await self.knowledge.IngestKnowledge(
            pb.IngestKnowledgeRequest(
                principal_id=CURATOR,
                scope_id=PROJECT,
                sources=list(sources) or [source()],
                facts=list(facts),
            )
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> Answer:
        async with mcp_client(self.url) as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error
        return Answer(result.structured_content, result.content[0].text)

    async def error(self, tool: str, arguments: dict[str, Any]) -> MCPError:
        async with mcp_client(self.url) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool(tool, arguments)
        return caught.value


@pytest.fixture
async def world(pg_dsn: str) -> AsyncIterator[World]:
    async with gateway_over_knowledge(
        pg_dsn, Identity(), tool_profile="advanced", pool_max_size=4
    ) as (url, knowledge):
        yield World(url, knowledge)


def _line_with(text: str, needle: str) -> str:
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, (needle, text)
    return lines[0]


async def test_the_report_explains_refused_verified_and_conflicted_attempts(world) -> None:
    await world.ingest(facts=[fact("payments", "owned_by", "team-a")])
    owner_key = fact_key(PROJECT, "payments", "owned_by", "team-a")

    refused = await world.error(
        "knowledge_propose", {"subject": "payments", "predicate": "ownz", "object": "x", **TASK}
    )
    assert refused.error.data["field"] == "predicate"
    assert refused.error.data["reason"] == "unknown_predicate"

    proposed = await world.call(
        "knowledge_propose",
        {"subject": "billing", "predicate": "uses", "object": "kafka", "project": "acme", **TASK},
    )
    assert proposed.data["outcome"] == "created"
    # It says whose curators review it (issue 41).
    assert proposed.data["review_project"] == "acme" and "acme" in proposed.text
    verified = await world.knowledge.VerifyProposal(
        pb.VerifyProposalRequest(
            curator_principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=proposed.data["fact"]["fact_key"],
        )
    )
    shared_key = verified.fact.fact_key
    assert shared_key == fact_key(PROJECT, "billing", "uses", "kafka")

    conflicted = await world.call(
        "knowledge_propose",
        {"subject": "payments", "predicate": "owned_by", "object": "team-b", **TASK},
    )
    assert conflicted.data["outcome"] == "conflicted" and conflicted.data["fact"] is None
    assert conflicted.data["conflicting_fact_keys"] == [owner_key]
    assert owner_key in conflicted.text and "awaits" not in conflicted.text

    report = await world.call("knowledge_proposal_report", {**TASK})
    by_outcome = {a["outcome"]: a for a in report.data["attempts"]}
    assert set(by_outcome) == {"rejected", "created", "conflicted"}

    rejected = by_outcome["rejected"]
    assert (rejected["reason"], rejected["subject"], rejected["fact_key"]) == (
        "unknown_predicate",
        "",
        "",
    )
    assert "unknown_predicate" in _line_with(report.text, "- rejected")

    became = by_outcome["created"]
    assert (became["fact_state"], became["superseded_by"]) == ("superseded", shared_key)
    assert shared_key in _line_with(report.text, "- created")

    contradicting = by_outcome["conflicted"]
    assert contradicting["conflicting_fact_keys"] == [owner_key]
    assert contradicting["superseded_by"] is None
    line = _line_with(report.text, "- conflicted")
    assert owner_key in line and "awaits" not in line


@pytest.mark.parametrize("valid_from", [None, datetime(2025, 6, 1, tzinfo=UTC)])
async def test_a_corrected_key_answers_its_superseded_version_and_the_replacement(
    world, valid_from: datetime | None
) -> None:
    """Both corrections: the old fact was wrong all along, or the world changed at
    the replacement's valid_from (the old version then ends there)."""
    await world.ingest(
        facts=[fact("payments", "uses_database", "MySQL", valid_from=ts(datetime(2024, 1, 1)))]
    )
    old_key = fact_key(PROJECT, "payments", "uses_database", "MySQL")
    replacement = fact("payments", "uses_database", "PostgreSQL")
    if valid_from is not None:
        replacement.valid_from.CopyFrom(ts(valid_from))
    corrected = await world.knowledge.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=old_key,
            replacement=replacement,
            reason="migrated",
        )
    )
    new_key = corrected.replacement.fact_key

    for tool in ("knowledge_get_fact", "knowledge_explain_fact"):
        answer = await world.call(tool, {"fact_key": old_key})
        old = answer.data["fact"]
        assert (old["fact_key"], old["object"]) == (old_key, "MySQL"), tool
        assert (old["state"], old["superseded_by"]) == ("superseded", new_key), tool
        assert f"superseded_by={new_key}" in answer.text, tool

    # An explicit as_of still asks exactly that: nothing of the old key is valid later on.
    later = await world.call(
        "knowledge_get_fact", {"fact_key": old_key, "as_of": "2030-01-01T00:00:00Z"}
    )
    if valid_from is not None:
        assert later.data["fact"] is None
        assert later.data["empty_reason"] == "not_valid_at_as_of"


async def test_a_fact_that_merely_expired_still_answers_not_found(world) -> None:
    ended = datetime(2024, 6, 1, tzinfo=UTC)
    await world.ingest(
        facts=[fact("payments", "uses", "redis", valid_from=ts(ended - timedelta(days=90)),
                    valid_to=ts(ended))]
    )
    key = fact_key(PROJECT, "payments", "uses", "redis")
    refused = await world.error("knowledge_explain_fact", {"fact_key": key})
    assert without_ids(refused.error.data) == {"code": "invalid_input", "field": "fact_key",
                                  "reason": "not_found"}
    gone = await world.call("knowledge_get_fact", {"fact_key": key})
    assert gone.data["fact"] is None and gone.data["empty_reason"] == "not_valid_at_as_of"


async def test_a_refused_argument_message_names_field_and_reason_not_the_value(world) -> None:
    refused = await world.error(
        "knowledge_propose",
        {"subject": "payments", "predicate": "owned_byy", "object": "team-z", **TASK},
    )
    data = refused.error.data
    assert (data["code"], data["field"], data["reason"]) == (
        "invalid_input",
        "predicate",
        "unknown_predicate",
    )
    assert "owned_by" in data["candidates"]
    message = refused.error.message
    assert "predicate" in message and "unknown_predicate" in message and "owned_by" in message
    assert "owned_byy" not in message and "team-z" not in message
    bounds = await world.error("knowledge_search", {"query": "q", "limit": 999})
    assert bounds.error.data["field"] == "limit"
    assert "limit" in bounds.error.message and "above_maximum" in bounds.error.message
    assert "999" not in bounds.error.message


async def test_bootstrap_lists_the_predicates_a_proposal_may_use(world) -> None:
    boot = await world.call("knowledge_bootstrap", {})
    policy = boot.data["proposal_policy"]
    ontology = load_ontology()
    assert set(policy["allowed_predicates"]) == (
        ontology.proposal_predicates | ontology.single_valued_predicates
    )
    assert set(policy["single_valued_predicates"]) == ontology.single_valued_predicates
    assert policy["ontology_version"] == ontology.version
    assert "depends_on" in boot.text and "owned_by" in boot.text


async def test_a_source_is_refreshed_in_place_by_reingesting_it_newer(world) -> None:
    """A curator refreshes a stale source by ingesting the same source id with a newer
    observed_at: one source, one more artifact version, its facts' citations fresh again,
    no fact duplicated; the same line again changes nothing."""
    stale_days = KnowledgeSettings().stale_source_days
    observed = datetime.now(UTC) - timedelta(days=stale_days + 30)
    await world.ingest(sources=[source(observed)], facts=[fact("billing", "uses", "kafka")])
    key = fact_key(PROJECT, "billing", "uses", "kafka")

    async def state() -> tuple[dict[str, Any], dict[str, Any]]:
        src = (await world.call("knowledge_get_source", {"source_id": "adr-7"})).data
        entity = (await world.call("knowledge_get_entity", {"entity": "billing"})).data
        return src, entity

    src, entity = await state()
    assert src["freshness"]["stale"] and src["freshness"]["reason"] == "source_stale"
    assert [w["fact_key"] for w in entity["freshness_warnings"]] == [key]

    refreshed_at = datetime.now(UTC) - timedelta(days=1)
    first = await world.ingest(sources=[source(refreshed_at)])
    again = await world.ingest(sources=[source(refreshed_at)])
    assert (first.sources.created, first.sources.deduplicated) == (0, 1)
    assert (again.sources.created, again.sources.deduplicated) == (0, 1)

    src, entity = await state()
    assert not src["freshness"]["stale"] and src["freshness"]["age_days"] <= 1
    assert len(src["versions"]) == 2 and src["cited_by_facts"] == 1
    assert entity["freshness_warnings"] == [] and entity["total_facts"] == 1


def test_every_tool_showing_tiers_or_freshness_explains_them() -> None:
    shown = {"tiers": 0, "freshness": 0}
    for spec in tools_for_profile("compatibility"):
        schema, description = repr(spec.output_schema), spec.definition().description or ""
        if "'trust_tier'" in schema:
            assert TRUST_TIER_NOTE in description, spec.name
            shown["tiers"] += 1
        if "'freshness_warnings'" in schema or "'freshness'" in schema:
            assert FRESHNESS_NOTE in description, spec.name
            shown["freshness"] += 1
        if "'trust_tier'" not in schema:
            assert TRUST_TIER_NOTE not in description, spec.name
    assert shown["tiers"] and shown["freshness"]
    assert str(KnowledgeSettings().stale_source_days) in FRESHNESS_NOTE
