"""memory_recent_changes (legacy alias) lists the most recently published facts, newest
first and never proposals, against the real knowledge service through the MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from harness import gateway_over_knowledge, mcp_client
from snapshot_harness import PERSONAL, SHARED, Identity

from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc

AGENT = "3f1c9a52-0000-4000-8000-0000000000aa"


@pytest.fixture
async def stack(pg_dsn: str) -> AsyncIterator[tuple[str, knowledge_pb2_grpc.KnowledgeServiceStub]]:
    async with gateway_over_knowledge(
        pg_dsn, Identity(), tool_profile="compatibility"
    ) as running:
        yield running


async def test_recent_changes_are_the_newest_published_facts(stack) -> None:
    url, knowledge = stack
    for obj in ("redis", "kafka", "ledger"):
        await knowledge.IngestKnowledge(
            pb.IngestKnowledgeRequest(
                principal_id=AGENT,
                scope_id=SHARED.project_id,
                facts=[pb.FactInput(subject="billing-api", predicate="depends_on", object=obj)],
            )
        )
    proposed = await knowledge.ProposeFact(
        pb.ProposeFactRequest(
            principal_id=AGENT,
            personal_scope_id=PERSONAL.project_id,
            readable_scope_ids=[SHARED.project_id],
            subject="billing-api",
            predicate="depends_on",
            object="vault",
            context=pb.TaskContext(runtime="claude-code", task_ref="t"),
        )
    )
    assert proposed.outcome == pb.PROPOSAL_OUTCOME_CREATED
    async with mcp_client(url) as client:
        first = (
            await client.call_tool("memory_recent_changes", {"limit": 2})
        ).structured_content
        assert [(c["change"], c["fact"]["object"]) for c in first["changes"]] == [
            ("published", "ledger"),
            ("published", "kafka"),
        ]
        assert first["has_more"]
        rest = (
            await client.call_tool(
                "memory_recent_changes", {"limit": 2, "cursor": first["next_cursor"]}
            )
        ).structured_content
        assert [c["fact"]["object"] for c in rest["changes"]] == ["redis"]
        # The canonical feed is unchanged: every change, oldest first.
        feed = (
            await client.call_tool("knowledge_get_changes", {"limit": 10})
        ).structured_content
        assert [c["change"] for c in feed["changes"]] == ["published"] * 3 + ["proposed"]
