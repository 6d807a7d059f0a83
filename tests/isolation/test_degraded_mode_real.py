"""The vector index unavailable, through the real services, the real gateway and the
official MCP client: the real embedded shard is closed under the running retrieval service,
and ``knowledge_get_context`` and ``knowledge_search`` still answer, from the lexical leg,
saying so in ``retrieval_mode``; a persisted pack records it and the gateway counts it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import isolation_stack
import pytest
from isolation_stack import Stack, full_stack

from vera.config import Settings
from vera.services.retrieval import server as retrieval_server
from vera.services.retrieval.ports import VectorIndex

QUERY = "which cluster does ledger-api deploy to"


@pytest.fixture
async def vector_stack(
    monkeypatch: pytest.MonkeyPatch, pg_dsn: str, identity_address: str, tmp_path, embedder
) -> AsyncIterator[tuple[Stack, list[VectorIndex], list[Any]]]:
    """The full stack, with a handle on the real vector index retrieval opened and on the
    gateway app (for its metrics registry): nothing is replaced, only remembered."""
    indexes: list[VectorIndex] = []
    apps: list[Any] = []
    open_index, build_gateway = retrieval_server.open_vector_index, isolation_stack.build_gateway

    async def remember_index(settings: Settings, dimensions: int) -> VectorIndex:
        indexes.append(await open_index(settings, dimensions))
        return indexes[-1]

    def remember_app(settings: Settings) -> Any:
        apps.append(build_gateway(settings))
        return apps[-1]

    monkeypatch.setattr(retrieval_server, "open_vector_index", remember_index)
    monkeypatch.setattr(isolation_stack, "build_gateway", remember_app)
    async with full_stack(pg_dsn, identity_address, tmp_path / "data", embedder) as stack:
        yield stack, indexes, apps


def degraded_count(app: Any, tool: str) -> float:
    value = app.state.metrics.registry.get_sample_value(
        "vera_mcp_degraded_answers_total", {"tool": tool}
    )
    return value or 0.0


async def test_an_unavailable_vector_index_degrades_to_lexical_results(vector_stack) -> None:
    stack, indexes, apps = vector_stack
    alice = await stack.account("alice")
    proposed = await stack.ok(
        alice,
        "knowledge_propose",
        {
            "subject": "ledger-api",
            "predicate": "deploys_to",
            "object": "eu-west cluster",
            "task_ref": "t-degraded",
        },
    )
    key = proposed["fact"]["fact_key"]
    await stack.wait_indexed()

    healthy = await stack.ok(alice, "knowledge_get_context", {"query": QUERY})
    assert healthy["retrieval_mode"] == "hybrid"
    assert key in [r["fact_key"] for r in healthy["results"]]
    assert healthy["results"][0]["signals"]["dense"] > 0

    [index] = indexes
    await index.close()  # the shard is gone: every vector search now raises

    context = await stack.ok(alice, "knowledge_get_context", {"query": QUERY})
    search = await stack.ok(alice, "knowledge_search", {"query": QUERY})
    for answer in (context, search):
        assert answer["retrieval_mode"] == "lexical_only"
        assert [r["fact_key"] for r in answer["results"]] == [key]
        assert answer["empty_reason"] is None
    async with stack.client(alice) as client:
        rendered = await client.call_tool("knowledge_get_context", {"query": QUERY})
    assert "retrieval_mode=lexical_only" in rendered.content[0].text

    pack = await stack.ok(alice, "knowledge_get_context", {"query": QUERY, "persist": True})
    assert (pack["persisted"], pack["retrieval_mode"]) == (True, "lexical_only")
    read_back = await stack.ok(alice, "knowledge_get_context_pack", {"pack_id": pack["pack_id"]})
    assert read_back["retrieval_mode"] == "lexical_only"
    feedback = {
        "context_pack_id": pack["pack_id"],
        "result_ref": pack["results"][0]["result_ref"],
        "signal": "up",
    }
    assert (await stack.ok(alice, "knowledge_feedback", feedback))["level"] == "result"
    conn = await asyncpg.connect(stack.dsn)
    try:
        stored = await conn.fetchval(
            "SELECT content::text FROM snapshot.context_packs WHERE pack_id = $1::uuid",
            pack["pack_id"],
        )
        # A degraded pack's dense signals are zeros: its feedback is no training data.
        vectors = await conn.fetch(
            "SELECT signal_vector FROM knowledge.retrieval_feedback WHERE pack_id::text = $1",
            pack["pack_id"],
        )
    finally:
        await conn.close()
    assert json.loads(stored)["retrieval_mode"] == "lexical_only"
    assert len(vectors) == 1 and json.loads(vectors[0]["signal_vector"]) == {}

    [app] = apps
    assert degraded_count(app, "knowledge_get_context") == 3  # two ephemeral, one persisted
    assert degraded_count(app, "knowledge_search") == 1
    assert degraded_count(app, "knowledge_get_context_pack") == 1  # the pack says degraded
    # The counter's only label is the registered tool name: no query, principal or project.
    for metric in app.state.metrics.registry.collect():
        if metric.name == "vera_mcp_degraded_answers":
            for sample in metric.samples:
                assert set(sample.labels) == {"tool"}
                assert "ledger" not in json.dumps(sample.labels)
