"""memory_recent_changes (legacy alias) lists the most recently published facts, newest
first and never proposals, against the real knowledge service through the MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client
from snapshot_harness import PERSONAL, SHARED, Identity, serve

from vera.config import (
    DatabaseSettings,
    McpSettings,
    ObservabilitySettings,
    ServiceAddresses,
    Settings,
)
from vera.identity.v1 import identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.services.knowledge import server as knowledge_server

AGENT = "3f1c9a52-0000-4000-8000-0000000000aa"


@pytest.fixture
async def stack(pg_dsn: str) -> AsyncIterator[tuple[str, knowledge_pb2_grpc.KnowledgeServiceStub]]:
    identity = create_server(
        [
            ServiceBinding(
                "vera.identity.v1.IdentityService",
                Identity(),
                identity_pb2_grpc.add_IdentityServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await identity.server.start()
    await mark_serving(identity)
    database = DatabaseSettings(dsn=pg_dsn, pool_min_size=1, pool_max_size=2)
    hosted = await knowledge_server.create(Settings(database=database), "127.0.0.1:0")
    await hosted.running.server.start()
    knowledge_address = f"127.0.0.1:{hosted.running.port}"
    fakes_address = f"127.0.0.1:{identity.port}"
    settings = Settings(
        environment="local",
        mcp=McpSettings(port=0, tool_profile="compatibility", quota_enabled=False),
        services=ServiceAddresses(
            identity=fakes_address,
            knowledge=knowledge_address,
            retrieval=fakes_address,
            snapshot=fakes_address,
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )
    channel = open_channel(knowledge_address, 10.0)
    try:
        async with serve(settings) as url:
            yield url, knowledge_pb2_grpc.KnowledgeServiceStub(channel)
    finally:
        await channel.close()
        await hosted.running.stop(0)
        await hosted.aclose()
        await identity.stop(0)


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
    async with Client(url) as client:
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
