"""The knowledge-graph tools through the real MCP client, against the real knowledge
service on PostgreSQL (identity is a small fake that grants two UUID scopes).

Covers the temporal correction (as_of / known_as_of give the old and new answers),
ambiguous entities with candidates, explore with provenance, the change feed,
conflicts, sources with freshness, communities and their lineage, and the bounds.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import gateway_over_knowledge, mcp_client
from mcp.shared.exceptions import MCPError

from vera.gateway.graph_tools import GRAPH_TOOLS
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc

PROJECT = str(uuid.uuid4())
OTHER = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())
CURATOR = str(uuid.uuid4())

_PROJECTS = [
    identity_pb2.Project(project_id=PERSONAL, slug="me", kind=identity_pb2.PROJECT_KIND_PERSONAL),
    identity_pb2.Project(project_id=PROJECT, slug="acme", kind=identity_pb2.PROJECT_KIND_SHARED),
    identity_pb2.Project(project_id=OTHER, slug="globex", kind=identity_pb2.PROJECT_KIND_SHARED),
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


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


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


class World:
    def __init__(self, url: str, knowledge: knowledge_pb2_grpc.KnowledgeServiceStub) -> None:
        self.url = url
        self.knowledge = knowledge

    async def ingest(self, scope: str = PROJECT, *, sources=(), entities=(), facts=()):
        return await self.knowledge.IngestKnowledge(
            pb.IngestKnowledgeRequest(
                principal_id=CURATOR,
                scope_id=scope,
                sources=list(sources)
                or [pb.SourceInput(source_id="adr-7", source_type="adr", title="ADR 7")],
                entities=list(entities),
                facts=list(facts),
            )
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return (await self.call_with_text(tool, arguments))[0]

    async def call_with_text(self, tool: str, arguments: dict[str, Any]) -> tuple[dict, str]:
        async with mcp_client(self.url) as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error
        assert result.content[0].text  # a text rendering for content-only clients
        return result.structured_content, result.content[0].text

    async def error(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async with mcp_client(self.url) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool(tool, arguments)
        assert caught.value.error.code == -32602
        return caught.value.error.data


@pytest.fixture
async def world(pg_dsn: str) -> AsyncIterator[World]:
    async with gateway_over_knowledge(
        pg_dsn, Identity(), tool_profile="advanced", pool_max_size=4
    ) as (url, knowledge):
        yield World(url, knowledge)


async def test_graph_tools_are_listed_read_only_with_bounds_and_meta(world) -> None:
    async with mcp_client(world.url) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    for spec in GRAPH_TOOLS:
        tool = listed[spec.name]
        assert tool.annotations.read_only_hint and tool.annotations.idempotent_hint
        assert tool.meta["dev.vera/quota_bucket"] == "read"
        assert tool.meta["dev.vera/cost_class"] == "low"
        assert tool.output_schema["type"] == "object"
    schema = listed["knowledge_explore"].input_schema["properties"]
    assert (schema["depth"]["minimum"], schema["depth"]["maximum"]) == (1, 5)
    assert schema["limit"]["maximum"] == 200
    assert listed["knowledge_get_entity"].input_schema["properties"]["limit"]["maximum"] == 500
    communities = listed["knowledge_search_communities"].input_schema["properties"]
    assert communities["limit"]["maximum"] == 100
    for tool in ("knowledge_get_changes", "knowledge_get_conflicts"):
        assert listed[tool].input_schema["properties"]["limit"]["maximum"] == 200


async def test_a_corrected_fact_answers_old_and_new_by_as_of_and_known_as_of(world) -> None:
    await world.ingest(
        facts=[
            fact(
                "payments",
                "uses_database",
                "MySQL",
                valid_from=ts(datetime(2024, 1, 1, tzinfo=UTC)),
            )
        ]
    )
    old = await world.call("knowledge_get_entity", {"entity": "payments"})
    old_key = old["facts"][0]["fact_key"]
    corrected = await world.knowledge.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=old_key,
            replacement=fact(
                "payments",
                "uses_database",
                "PostgreSQL",
                valid_from=ts(datetime(2025, 6, 1, tzinfo=UTC)),
            ),
            reason="migrated",
        )
    )
    corrected_at = corrected.replacement.recorded_at.ToDatetime(tzinfo=UTC)
    before = (corrected_at - timedelta(microseconds=1)).isoformat()

    async def objects(**extra: Any) -> list[str]:
        data = await world.call("knowledge_get_entity", {"entity": "payments", **extra})
        return [f["object"] for f in data["facts"]]

    assert await objects() == ["PostgreSQL"]
    assert await objects(as_of="2025-03-01T00:00:00Z") == ["MySQL"]
    assert await objects(known_as_of=before) == ["MySQL"]
    assert await objects(as_of="2025-03-01T00:00:00Z", known_as_of=before) == ["MySQL"]

    got = await world.call(
        "knowledge_get_fact", {"fact_key": old_key, "as_of": "2025-03-01T00:00:00Z"}
    )
    assert got["fact"]["superseded_by"] == corrected.replacement.fact_key
    assert [v["state"] for v in got["versions"]] == ["active", "active"]
    assert got["versions"][0]["superseded_at"] is not None
    then = await world.call("knowledge_get_fact", {"fact_key": old_key, "known_as_of": before})
    assert len(then["versions"]) == 1 and then["fact"]["valid_to"] is None
    future = await world.call(
        "knowledge_get_fact", {"fact_key": old_key, "as_of": "2026-01-01T00:00:00Z"}
    )
    assert future["fact"] is None and future["empty_reason"] == "not_valid_at_as_of"

    feed = await world.call("knowledge_get_changes", {"limit": 200})
    assert [c["change"] for c in feed["changes"]][-2:] == ["corrected", "correction"]
    assert feed["next_cursor"] and not feed["has_more"]
    later = await world.call("knowledge_get_changes", {"cursor": feed["next_cursor"]})
    assert later["changes"] == [] and later["empty_reason"] == "no_new_changes"


async def test_entities_explore_sources_and_conflicts(world) -> None:
    await world.ingest(
        sources=[
            pb.SourceInput(
                source_id="adr-7", title="ADR 7", observed_at=ts(datetime(2020, 1, 1, tzinfo=UTC))
            )
        ],
        entities=[pb.EntityInput(name="ledger", aliases=["pay"])],
        facts=[
            fact("checkout", "calls", "payments"),
            fact("payments", "depends_on", "ledger"),
            fact("ledger", "uses_database", "postgres"),
            fact("ledger", "uses_database", "mysql"),
        ],
    )
    await world.ingest(OTHER, entities=[pb.EntityInput(name="paywall", aliases=["pay"])])

    data = await world.error("knowledge_get_entity", {"entity": "pay"})
    assert data["code"] == "invalid_input" and data["field"] == "entity"
    assert sorted(c["name"] for c in data["candidates"]) == ["ledger", "paywall"]
    chosen = await world.call("knowledge_get_entity", {"entity": "pay", "project": "acme"})
    assert chosen["entity"]["name"] == "ledger"
    assert chosen["freshness_warnings"][0]["reason"] == "source_stale"
    only = await world.call(
        "knowledge_get_entity", {"entity": "ledger", "conflict_handling": "only"}
    )
    assert sorted(f["object"] for f in only["facts"]) == ["mysql", "postgres"]

    hood = await world.call("knowledge_explore", {"entity": "checkout", "depth": 3})
    assert [(e["hop"], e["from"], e["to"]) for e in hood["edges"][:2]] == [
        (1, "checkout", "payments"),
        (2, "payments", "ledger"),
    ]
    assert all(e["fact"]["citations"][0]["source_id"] == "adr-7" for e in hood["edges"])
    assert (await world.error("knowledge_explore", {"entity": "x", "depth": 6}))["field"] == (
        "depth"
    )
    assert (await world.error("knowledge_explore", {}))["field"] == "entity"

    conflicts = await world.call("knowledge_get_conflicts", {})
    assert conflicts["total"] == 1
    assert {f["state"] for f in conflicts["conflicts"][0]["facts"]} == {"disputed"}

    source = await world.call("knowledge_get_source", {"source_id": "adr-7", "project": "acme"})
    assert source["freshness"]["stale"] and source["cited_by_facts"] == 4
    assert source["freshness_warnings"][0]["source_id"] == "adr-7"
    missing = await world.error("knowledge_get_source", {"source_id": "nope"})
    assert missing["field"] == "source_id"


async def test_communities_are_non_authoritative_with_run_and_lineage(world) -> None:
    empty = await world.call("knowledge_search_communities", {"query": "payments"})
    assert empty["communities"] == [] and empty["empty_reason"] == "no_communities_derived"
    await world.ingest(
        facts=[
            fact("payments", "depends_on", "ledger"),
            fact("ledger", "stores_data_in", "postgres"),
            fact("payments", "calls", "postgres"),
            fact("search", "depends_on", "elastic"),
            fact("elastic", "runs_on", "k8s"),
            fact("search", "calls", "k8s"),
        ]
    )
    run = await world.knowledge.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))
    found = await world.call("knowledge_search_communities", {"query": "elastic", "limit": 1})
    (community,) = found["communities"]
    assert community["authoritative"] is False and found["authoritative"] is False
    assert community["summary"].startswith("Extractive summary")
    assert community["derivation_run"]["derivation_run_id"] == run.run.run_id
    assert community["derivation_run"]["algorithm"] == "louvain"
    lineage = await world.call(
        "knowledge_get_community_lineage", {"community_id": community["community_id"], "limit": 2}
    )
    assert lineage["total"] == 3 and len(lineage["facts"]) == 2 and lineage["next_cursor"]
    rest = await world.call(
        "knowledge_get_community_lineage",
        {"community_id": community["community_id"], "cursor": lineage["next_cursor"]},
    )
    assert len(rest["facts"]) == 1 and rest["next_cursor"] is None
    bad = await world.error("knowledge_get_community_lineage", {"community_id": "nope"})
    assert bad["field"] == "community_id"
    assert (await world.error("knowledge_search_communities", {"query": "x", "limit": 101}))[
        "field"
    ] == "limit"


# Bi-temporal boundaries on every read tool ------------------------------------------------

READ_TOOLS_WITH_BOTH_BOUNDARIES = (
    "knowledge_search",
    "knowledge_explain_fact",
    "knowledge_get_evidence",
    *(spec.name for spec in GRAPH_TOOLS),
)
_REQUIRED = {
    "knowledge_get_changes": {},
    "knowledge_get_source": {"source_id": "adr-7"},
    "knowledge_search_communities": {"query": "x"},
    "knowledge_get_community_lineage": {"community_id": str(uuid.uuid4())},
}


def _at(value: Timestamp) -> datetime:
    return value.ToDatetime(tzinfo=UTC)


async def test_every_read_tool_takes_both_boundaries_with_the_guide_bounds(world) -> None:
    async with mcp_client(world.url) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    for name in READ_TOOLS_WITH_BOTH_BOUNDARIES:
        properties = listed[name].input_schema["properties"]
        for boundary in ("as_of", "known_as_of"):
            assert (properties[boundary]["minLength"], properties[boundary]["maxLength"]) == (
                1,
                64,
            ), (name, boundary)
    for tool, required in _REQUIRED.items():
        for boundary in ("as_of", "known_as_of"):
            for bad in ("yesterday", "2025-01-01T00:00:00" + "0" * 60, ""):
                data = await world.error(tool, {**required, boundary: bad})
                assert (data["code"], data["field"]) == ("invalid_input", boundary), (tool, bad)


async def test_change_feed_honours_known_as_of_and_as_of_independently_and_combined(
    world,
) -> None:
    await world.ingest(
        facts=[fact("payments", "uses_database", "MySQL", valid_from=ts(datetime(2024, 1, 1)))]
    )
    key = (await world.call("knowledge_get_entity", {"entity": "payments"}))["facts"][0]["fact_key"]
    corrected = await world.knowledge.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=key,
            replacement=fact(
                "payments", "uses_database", "PostgreSQL", valid_from=ts(datetime(2025, 6, 1))
            ),
            reason="migrated",
        )
    )
    before = (_at(corrected.replacement.recorded_at) - timedelta(microseconds=1)).isoformat()

    async def changes(**extra: Any) -> list[str]:
        data = await world.call("knowledge_get_changes", {"limit": 200, **extra})
        return [c["change"] for c in data["changes"] if c["fact"]]

    assert await changes() == ["published", "corrected", "correction"]
    assert await changes(known_as_of=before) == ["published"]
    # The closed version was valid until 2025-06; the replacement only from then.
    assert await changes(as_of="2025-03-01T00:00:00Z") == ["published", "corrected"]
    assert await changes(as_of="2025-09-01T00:00:00Z") == ["published", "correction"]
    assert await changes(as_of="2023-01-01T00:00:00Z") == []
    assert await changes(as_of="2025-09-01T00:00:00Z", known_as_of=before) == ["published"]
    # The cursor is a ledger position: paging the filtered feed loses nothing.
    first = await world.call("knowledge_get_changes", {"limit": 1, "known_as_of": before})
    rest = await world.call(
        "knowledge_get_changes", {"cursor": first["next_cursor"], "known_as_of": before}
    )
    assert [c["change"] for c in first["changes"] + rest["changes"] if c["fact"]] == ["published"]


async def test_source_honours_known_as_of_and_as_of(world) -> None:
    await world.ingest(
        sources=[
            pb.SourceInput(source_id="adr-7", title="v1", observed_at=ts(datetime(2020, 1, 1)))
        ],
        facts=[fact("payments", "depends_on", "ledger", valid_from=ts(datetime(2021, 1, 1)))],
    )
    first = await world.call("knowledge_get_source", {"source_id": "adr-7"})
    recorded = first["versions"][0]["recorded_at"]
    await world.ingest(
        sources=[
            pb.SourceInput(source_id="adr-7", title="v2", observed_at=ts(datetime(2024, 1, 1)))
        ],
        facts=[fact("payments", "calls", "ledger")],
    )

    async def source(**extra: Any) -> tuple[list[str], int]:
        data = await world.call("knowledge_get_source", {"source_id": "adr-7", **extra})
        return [v["title"] for v in data["versions"]], data["cited_by_facts"]

    assert await source() == (["v2", "v1"], 2)
    assert await source(known_as_of=recorded) == (["v1"], 1)
    assert await source(as_of="2022-01-01T00:00:00Z") == (["v1"], 2)
    assert await source(as_of="2020-06-01T00:00:00Z") == (["v1"], 1)  # depends_on not yet valid
    assert await source(as_of="2020-06-01T00:00:00Z", known_as_of=recorded) == (["v1"], 0)
    data = await world.error(
        "knowledge_get_source", {"source_id": "adr-7", "as_of": "2019-01-01T00:00:00Z"}
    )
    assert (data["code"], data["field"]) == ("invalid_input", "source_id")


async def test_communities_and_lineage_honour_known_as_of_and_as_of(world) -> None:
    await world.ingest(
        facts=[
            fact("payments", "depends_on", "ledger"),
            fact("ledger", "stores_data_in", "postgres"),
            fact("payments", "calls", "postgres"),
        ]
    )
    first = await world.knowledge.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))
    first_at = _at(first.run.created_at).isoformat()
    since = ts(datetime(2025, 1, 1))
    await world.ingest(
        facts=[
            fact("search", "depends_on", "elastic", valid_from=since),
            fact("elastic", "runs_on", "k8s", valid_from=since),
            fact("search", "calls", "k8s"),
        ]
    )
    await world.knowledge.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))

    async def labels(**extra: Any) -> list[str]:
        data = await world.call("knowledge_search_communities", {"query": "elastic", **extra})
        return [c["community_id"] for c in data["communities"]]

    (elastic,) = await labels()
    assert await labels(known_as_of=first_at) == []  # the first run knew no elastic
    assert await labels(as_of="2025-06-01T00:00:00Z") == [elastic]
    assert await labels(as_of="2024-06-01T00:00:00Z") == [elastic]  # search calls k8s
    assert await labels(as_of="2024-06-01T00:00:00Z", known_as_of=first_at) == []

    async def lineage(**extra: Any) -> int:
        data = await world.call(
            "knowledge_get_community_lineage", {"community_id": elastic, **extra}
        )
        assert data["total"] == len(data["facts"])
        return data["total"]

    assert await lineage() == 3
    assert await lineage(as_of="2024-06-01T00:00:00Z") == 1
    assert await lineage(as_of="2025-06-01T00:00:00Z") == 3
    data = await world.error(
        "knowledge_get_community_lineage", {"community_id": elastic, "known_as_of": first_at}
    )
    assert (data["code"], data["field"]) == ("invalid_input", "community_id")
    (payments,) = (
        await world.call(
            "knowledge_search_communities", {"query": "ledger", "known_as_of": first_at}
        )
    )["communities"]
    assert payments["derivation_run"]["derivation_run_id"] == first.run.run_id
    assert await lineage() == 3


async def test_conflicts_explain_and_evidence_combine_both_boundaries(world) -> None:
    await world.ingest(
        facts=[fact("ledger", "uses_database", "postgres", valid_from=ts(datetime(2024, 1, 1)))]
    )
    key = (await world.call("knowledge_get_entity", {"entity": "ledger"}))["facts"][0]["fact_key"]
    await world.ingest(
        facts=[fact("ledger", "uses_database", "mysql", valid_from=ts(datetime(2025, 1, 1)))]
    )
    mysql = await world.call(
        "knowledge_get_entity", {"entity": "ledger", "conflict_handling": "only"}
    )
    recorded = max(_iso(f["recorded_at"]) for f in mysql["facts"])
    before = (recorded - timedelta(microseconds=1)).isoformat()

    async def total(**extra: Any) -> int:
        return (await world.call("knowledge_get_conflicts", extra))["total"]

    assert await total() == 1
    assert await total(known_as_of=before) == 0
    assert await total(as_of="2024-06-01T00:00:00Z") == 0
    assert await total(as_of="2025-06-01T00:00:00Z", known_as_of=before) == 0
    explained = await world.call(
        "knowledge_explain_fact",
        {"fact_key": key, "as_of": "2024-06-01T00:00:00Z", "known_as_of": before},
    )
    assert explained["fact"]["state"] == "active"  # not yet disputed then
    early = await world.error(
        "knowledge_explain_fact", {"fact_key": key, "as_of": "2023-06-01T00:00:00Z"}
    )
    assert (early["code"], early["field"]) == ("invalid_input", "fact_key")
    evidence = await world.call(
        "knowledge_get_evidence",
        {"fact_key": key, "as_of": "2025-06-01T00:00:00Z", "known_as_of": before},
    )
    assert evidence["fact_key"] == key and evidence["total"] >= 1


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_conflict_pages_use_a_keyset_cursor_that_survives_a_resolved_group(world) -> None:
    subjects = ("alpha", "beta", "gamma")
    await world.ingest(
        sources=[pb.SourceInput(source_id="adr-7", title="ADR 7")]
        + [pb.SourceInput(source_id=f"src-{s}", title=s) for s in subjects],
        facts=[fact(s, "uses_database", "postgres") for s in subjects]
        + [
            pb.FactInput(subject=s, predicate="uses_database", object="mysql", source_id=f"src-{s}")
            for s in subjects
        ],
    )
    first = await world.call("knowledge_get_conflicts", {"limit": 1})
    assert first["total"] == 3 and first["next_cursor"]
    (seen,) = [g["subject"] for g in first["conflicts"]]
    # The first page's group resolves before the next page is read: nothing shifts.
    await world.knowledge.RetractSource(
        pb.RetractSourceRequest(
            curator_principal_id=CURATOR, scope_id=PROJECT, source_id=f"src-{seen}", reason="r"
        )
    )
    rest = await world.call("knowledge_get_conflicts", {"cursor": first["next_cursor"]})
    assert rest["total"] == 2 and rest["next_cursor"] is None
    assert sorted(g["subject"] for g in rest["conflicts"]) == sorted(set(subjects) - {seen})
    again = await world.call("knowledge_get_conflicts", {"limit": 1})
    second = await world.call(
        "knowledge_get_conflicts", {"limit": 1, "cursor": again["next_cursor"]}
    )
    assert second["next_cursor"] is None
    assert {g["subject"] for g in again["conflicts"] + second["conflicts"]} == set(subjects) - {
        seen
    }
    bad = await world.error("knowledge_get_conflicts", {"cursor": "djE6MTA"})  # an offset token
    assert (bad["code"], bad["field"]) == ("invalid_input", "cursor")


@pytest.fixture
async def counting_two(pg_dsn: str) -> AsyncIterator[World]:
    """A knowledge service that counts at most two rows for a total."""
    async with gateway_over_knowledge(
        pg_dsn, Identity(), tool_profile="advanced", knowledge_fields={"max_counted_rows": 2}
    ) as (url, knowledge):
        yield World(url, knowledge)


async def test_totals_past_the_count_limit_say_at_least(counting_two) -> None:
    world = counting_two
    await world.ingest(facts=[fact("ledger", "depends_on", f"dep-{i}") for i in range(4)]
                       + [fact("ledger", "uses_database", db) for db in ("pg", "mysql")])
    entity, text = await world.call_with_text("knowledge_get_entity",
                                              {"entity": "ledger", "limit": 1})
    assert (entity["total_facts"], entity["total_facts_is_lower_bound"]) == (2, True)
    assert "1 of at least 2 related facts" in text
    only = await world.call("knowledge_get_entity",
                            {"entity": "ledger", "conflict_handling": "only", "limit": 1})
    assert (only["total_facts"], only["total_facts_is_lower_bound"]) == (2, False)
    conflicts = await world.call("knowledge_get_conflicts", {})
    assert (conflicts["total"], conflicts["total_is_lower_bound"]) == (1, False)

    await world.knowledge.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))
    found = await world.call("knowledge_search_communities", {"query": "ledger", "limit": 1})
    (community,) = found["communities"]
    page, text = await world.call_with_text(
        "knowledge_get_community_lineage",
        {"community_id": community["community_id"], "limit": 2})
    assert (page["total"], page["total_is_lower_bound"]) == (2, True)
    assert "(at least 2 facts)" in text
    seen = len(page["facts"])
    while page["next_cursor"]:  # paging goes on past the counted total
        page = await world.call(
            "knowledge_get_community_lineage",
            {"community_id": community["community_id"], "limit": 2,
             "cursor": page["next_cursor"]})
        seen += len(page["facts"])
    assert seen == community["lineage_fact_count"] > 2
