"""Discovery profiles, tool metadata and the memory_* aliases through the real MCP client."""

from __future__ import annotations

import pytest
from harness import mcp_client, without_ids

CODING = {
    "knowledge_bootstrap",
    "knowledge_get_context",
    "knowledge_search",
    "knowledge_get_context_pack",
    "knowledge_explain_fact",
    "knowledge_get_evidence",
    "knowledge_feedback",
    "knowledge_propose",
    "knowledge_retract_proposal",
    "knowledge_proposal_report",
}
ADVANCED = CODING | {
    "knowledge_get_fact",
    "knowledge_get_entity",
    "knowledge_get_source",
    "knowledge_explore",
    "knowledge_get_changes",
    "knowledge_get_conflicts",
    "knowledge_search_communities",
    "knowledge_get_community_lineage",
    "knowledge_get_snapshot",
    "knowledge_create_snapshot",
}
ALIASES = {
    "memory_search",
    "memory_get_context",
    "memory_explore",
    "memory_explain",
    "memory_get_source",
    "memory_recent_changes",
    "memory_propose",
    "memory_feedback",
}

# The seed's tables: (authorization class, quota bucket, readOnly, idempotent, destructive).
READ = ("READ", "read", True, True, False)
SEED = {
    **{name: READ for name in ADVANCED | ALIASES},
    "knowledge_get_context": ("READ", "context", False, False, False),
    "knowledge_create_snapshot": ("SNAPSHOT", "snapshot", False, False, False),
    "knowledge_propose": ("PROPOSE", "propose", False, False, False),
    "memory_propose": ("PROPOSE", "propose", False, False, False),
    "knowledge_retract_proposal": ("PROPOSE", "propose", False, True, True),
    "knowledge_feedback": ("FEEDBACK", "feedback", False, True, False),
    "memory_feedback": ("FEEDBACK", "feedback", False, False, False),
}
WRITES = {
    "knowledge_create_snapshot",
    "knowledge_propose",
    "memory_propose",
    "knowledge_retract_proposal",
    "knowledge_feedback",
    "memory_feedback",
}
HIGH, MEDIUM = (
    {"knowledge_create_snapshot"},
    {
        "knowledge_get_context",
        "knowledge_search",
        "memory_search",
        "memory_get_context",
        "memory_explain",
    },
)


async def listed(url: str):
    async with mcp_client(url) as client:
        return (await client.list_tools()).tools


@pytest.mark.parametrize(
    ("profile", "expected"),
    [("coding", CODING), ("advanced", ADVANCED), ("compatibility", ADVANCED | ALIASES)],
)
async def test_profiles_list_10_20_28_tools(start_gateway, profile, expected):
    async with start_gateway(tool_profile=profile, quota_enabled=False) as gw:
        tools = await listed(gw.url)
    assert len(tools) == {"coding": 10, "advanced": 20, "compatibility": 28}[profile]
    assert {t.name for t in tools} == expected


async def test_every_tool_carries_the_seed_class_bucket_cost_and_annotations(start_gateway):
    async with start_gateway(tool_profile="compatibility", quota_enabled=False) as gw:
        tools = await listed(gw.url)
    for tool in tools:
        auth, bucket, read_only, idempotent, destructive = SEED[tool.name]
        meta = tool.meta or {}
        assert meta["dev.vera/authorization_class"] == auth, tool.name
        assert meta["dev.vera/quota_bucket"] == bucket, tool.name
        cost = "high" if tool.name in HIGH else "medium" if tool.name in MEDIUM else "low"
        assert meta["dev.vera/cost_class"] == cost, tool.name
        hints = tool.annotations
        assert (hints.read_only_hint, hints.idempotent_hint, hints.destructive_hint) == (
            read_only,
            idempotent,
            destructive,
        ), tool.name
        assert hints.open_world_hint is True
        key = meta.get("dev.vera/idempotency")
        if tool.name in WRITES:
            assert key == {
                "header": "Idempotency-Key",
                "parameter": "_meta.idempotencyKey",
                "maxLength": 255,
            }
        else:
            assert key is None, tool.name


@pytest.mark.parametrize("name", ["knowledge_create_snapshot", "memory_search", "no_such_tool"])
async def test_a_hidden_tool_is_refused_like_an_unknown_one(start_gateway, call_error, name):
    async with start_gateway(tool_profile="coding", quota_enabled=False) as gw:
        async with mcp_client(gw.url) as client:
            error = await call_error(client, name, {"query": "q"})
    assert error.code == -32602
    assert without_ids(error.data) == {
        "code": "invalid_input", "field": "name", "reason": "unknown_tool",
    }


async def test_search_aliases_are_searches_with_their_limits(start_gateway, fakes):
    async with start_gateway(tool_profile="compatibility", quota_enabled=False) as gw:
        async with mcp_client(gw.url) as client:
            for tool, args, limit in (
                ("memory_search", {"query": "db", "as_of": "2025-01-01T00:00:00Z"}, 10),
                ("memory_search", {"query": "db", "limit": 7}, 7),
                ("memory_get_context", {"query": "db"}, 5),
                ("memory_explain", {"query": "db"}, 3),
            ):
                result = await client.call_tool(tool, args)
                assert not result.is_error
                request = fakes.rec.last("Search")
                assert request.limit == limit
                assert request.query == "db"
                assert result.structured_content["results"][0]["fact_key"] == "fact-1"
            assert fakes.rec.last("Search").filters.HasField("as_of") is False
            await client.call_tool(
                "memory_search", {"query": "db", "as_of": "2025-01-01T00:00:00Z"}
            )
            assert fakes.rec.last("Search").filters.as_of.seconds == 1735689600


async def test_memory_get_source_propose_and_feedback(start_gateway, fakes):
    async with start_gateway(tool_profile="compatibility", quota_enabled=False) as gw:
        async with mcp_client(gw.url) as client:
            source = await client.call_tool("memory_get_source", {"fact_key": "fact-1"})
            assert source.structured_content["fact"]["fact_key"] == "fact-1"
            assert [s["source_id"] for s in source.structured_content["sources"]] == ["adr-7"]

            proposed = await client.call_tool(
                "memory_propose",
                {"subject": "s", "predicate": "p", "object": "o", "task_ref": "T-9"},
            )
            assert proposed.structured_content["outcome"] == "created"
            assert fakes.rec.last("ProposeFact").context.task_ref == "T-9"

            # Legacy feedback without a pack: the client's query is kept for reference, its
            # signals are never calibration data, and nothing claims a pack or a rank.
            legacy = await client.call_tool(
                "memory_feedback",
                {"result_ref": "fact-1", "signal": "up", "query": "db", "signals": ["x"]},
            )
            assert legacy.structured_content["level"] == "legacy"
            assert legacy.structured_content["context_pack_id"] is None
            recorded = fakes.rec.last("RecordFeedback")
            assert (recorded.query, recorded.rank, dict(recorded.signal_vector)) == ("db", 0, {})
            again = await client.call_tool(
                "memory_feedback", {"result_ref": "fact-1", "signal": "up"}
            )
            assert fakes.rec.last("RecordFeedback").pack_id != recorded.pack_id
            assert again.structured_content["created"] is True

            # With a persisted pack: exact attribution from the pack, like knowledge_feedback.
            pack = await client.call_tool("knowledge_get_context", {"query": "q", "persist": True})
            pack_id = pack.structured_content["pack_id"]
            exact = await client.call_tool(
                "memory_feedback",
                {
                    "result_ref": "ref-2",
                    "signal": "down",
                    "context_pack_id": pack_id,
                    "query": "spoofed",
                    "signals": ["spoofed"],
                },
            )
            assert exact.structured_content["level"] == "result"
            recorded = fakes.rec.last("RecordFeedback")
            assert (recorded.pack_id, recorded.query, recorded.rank) == (pack_id, "q", 2)
            assert dict(recorded.signal_vector) == {"dense": 2.5, "lexical": 0.5}


async def test_graph_aliases_run_the_canonical_traversal_and_feed(pg_dsn):
    """memory_explore and memory_recent_changes against the real knowledge service (the
    feed alias reads newest first and only published facts: test_memory_recent_changes.py)."""
    from harness import gateway_over_knowledge
    from snapshot_harness import SHARED, Identity

    from vera.knowledge.v1 import knowledge_service_pb2 as pb

    async with gateway_over_knowledge(
        pg_dsn, Identity(), tool_profile="compatibility"
    ) as (url, knowledge):
        await knowledge.IngestKnowledge(
            pb.IngestKnowledgeRequest(
                principal_id=str(SHARED.project_id),
                scope_id=SHARED.project_id,
                sources=[pb.SourceInput(source_id="adr-7", source_type="adr", title="ADR 7")],
                facts=[
                    pb.FactInput(subject=s, predicate=p, object=o, source_id="adr-7", evidence="e")
                    for s, p, o in (
                        ("checkout", "calls", "payments"),
                        ("payments", "depends_on", "ledger"),
                    )
                ],
            )
        )
        async with mcp_client(url) as client:
            for alias, canonical, args in (
                ("memory_explore", "knowledge_explore", {"entity": "checkout", "depth": 3}),
            ):
                legacy = await client.call_tool(alias, args)
                current = await client.call_tool(canonical, args)
                assert not legacy.is_error and not current.is_error
                assert legacy.structured_content == current.structured_content
            recent = await client.call_tool("memory_recent_changes", {"limit": 5})
            assert [c["fact"]["object"] for c in recent.structured_content["changes"]] == [
                "ledger",
                "payments",
            ]
            hood = (
                await client.call_tool("memory_explore", {"entity": "checkout"})
            ).structured_content
            assert [e["to"] for e in hood["edges"]][:2] == ["payments", "ledger"]
