"""The retrieval service end to end: real PostgreSQL, Qdrant in memory, the real MiniLM
embedder, and an in-process fake knowledge service serving the change log."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from retrieval_fakes import (
    FACTS_A,
    FACTS_B,
    SCOPE_A,
    SCOPE_B,
    Stack,
    fake_knowledge,
    make_fact,
)

from vera.config import ConfigError, Settings
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.retrieval.server import create


@pytest.fixture
async def stack(pg_dsn, embedder, tmp_path) -> AsyncIterator[Stack]:
    knowledge, fake = await fake_knowledge((SCOPE_A, FACTS_A), (SCOPE_B, FACTS_B))
    settings = Settings(
        data_dir=tmp_path,
        database={"dsn": pg_dsn},
        services={"knowledge": f"127.0.0.1:{fake.port}"},
        retrieval={"qdrant_url": ":memory:", "index_poll_seconds": 0.02},
    )
    hosted = await create(settings, "127.0.0.1:0", embedder=embedder)
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", 30.0)
    try:
        yield Stack(knowledge, retrieval_pb2_grpc.RetrievalServiceStub(channel))
    finally:
        await channel.close()
        await hosted.running.stop(grace=1.0)
        await hosted.aclose()
        await fake.stop(grace=1.0)


async def search(stack: Stack, query: str, scopes=(SCOPE_A,), **kwargs):
    return await stack.retrieval.Search(
        retrieval_pb2.SearchRequest(scope_ids=list(scopes), query=query, limit=5, **kwargs)
    )


async def test_indexes_the_log_and_finds_paraphrased_facts(stack: Stack):
    status = await stack.wait_indexed()
    assert status.head_position == status.indexed_position == len(FACTS_A) + len(FACTS_B)
    assert status.indexed_facts == len(FACTS_A) + len(FACTS_B)

    response = await search(stack, "which team is responsible for the payments API?")
    top = response.results[0]
    assert (top.fact.subject, top.fact.predicate) == ("payments-api", "owned_by")
    assert top.rank == 1 and top.result_ref == top.fact.version_id
    assert top.fact.citations[0].source_id == "adr-0"
    assert {"dense", "lexical", "fused", "final"} <= set(top.signals)

    response = await search(stack, "how long do login credentials stay valid")
    assert response.results[0].fact.subject == "auth-service"

    # A scope the caller does not hold never leaks, whatever the query.
    for query in ("skunkworks squad", "who owns payments-api"):
        response = await search(stack, query)
        assert all(r.fact.scope_id == SCOPE_A for r in response.results)
    response = await search(stack, "skunkworks squad", scopes=(SCOPE_B,))
    assert [r.fact.scope_id for r in response.results] == [SCOPE_B]


async def test_retracted_and_superseded_versions_disappear(stack: Stack):
    await stack.wait_indexed()
    owner = stack.knowledge.current[f"{SCOPE_A[:8]}-0"]

    retracted = knowledge_pb2.Fact()
    retracted.CopyFrom(owner)
    retracted.state = knowledge_pb2.FACT_STATE_RETRACTED
    stack.knowledge.record(retracted)
    # The authoritative re-read drops it at once, before the indexer catches up.
    response = await search(stack, "which team owns the payments API")
    assert owner.fact_key not in [r.fact.fact_key for r in response.results]

    deploy = stack.knowledge.current[f"{SCOPE_A[:8]}-1"]
    newer = make_fact(
        SCOPE_A,
        1,
        "billing-service",
        "deployed_with",
        "GitHub Actions with blue-green deploys",
        version_id=f"{deploy.fact_key}-v2",
        recorded_at=datetime(2025, 3, 1, tzinfo=UTC),
    )
    stack.knowledge.record(newer)
    await stack.wait_indexed()
    response = await search(stack, "how is the billing service deployed?")
    top = response.results[0]
    assert top.fact.fact_key == deploy.fact_key and top.result_ref == newer.version_id
    assert sum(r.fact.fact_key == deploy.fact_key for r in response.results) == 1


async def test_assemble_context_within_budget(stack: Stack):
    await stack.wait_indexed()
    request = retrieval_pb2.AssembleContextRequest(
        scope_id=SCOPE_A,
        query="what database does checkout use",
        limit=3,
        token_budget=2000,
        filters=retrieval_pb2.RetrievalFilters(repository="github.com/acme/shop"),
        compact_citations=True,
    )
    response = await stack.retrieval.AssembleContext(request)
    assert response.results[0].fact.subject == "checkout-web"
    assert_runs_contract(response.assembler_version)
    assert 0 < response.token_estimate <= 2000
    assert response.results[0].fact.citations[0].excerpt == ""  # compact

    request.token_budget = 1
    response = await stack.retrieval.AssembleContext(request)
    assert not response.results and response.empty_reason == "token_budget"
    assert response.omitted and {o.reason for o in response.omitted} == {"token_budget"}


def assert_runs_contract(version: str) -> None:
    """The contract of the stack's own settings, read from its parts rather than computed
    by the code under test: this generation's ranking policy, int8 MiniLM vectors, and
    qdrant-client's local index (tests/services/retrieval/pipeline/test_retrieval_contract.py
    derives each part from what decides ranking)."""
    policy, embedding, index = version.split(";")
    assert re.fullmatch(r"assembler-3-[0-9a-f]+", policy), policy
    assert (embedding, index) == ("minilm-l6-v2-int8", "index-qdrant-local")


async def test_search_reports_the_contract_version_it_ranked_by(stack: Stack):
    await stack.wait_indexed()
    response = await search(stack, "what database does checkout use")
    assert_runs_contract(response.assembler_version)
    assembled = await stack.retrieval.AssembleContext(retrieval_pb2.AssembleContextRequest(
        scope_id=SCOPE_A, query="what database does checkout use", limit=3))
    assert assembled.assembler_version == response.assembler_version


async def test_empty_reasons_and_errors(stack: Stack):
    await stack.wait_indexed()
    response = await search(stack, "anything", scopes=(str(uuid.uuid4()),))
    assert not response.results and response.empty_reason == "no_facts_in_scope"
    response = await search(
        stack,
        "payments team",
        filters=retrieval_pb2.RetrievalFilters(document_type="runbook"),
    )
    assert not response.results and response.empty_reason == "filtered_out"
    with pytest.raises(InvalidInput):
        await search(stack, "payments", scopes=())


async def test_create_requires_a_database(tmp_path):
    with pytest.raises(ConfigError, match="VERA_DATABASE__DSN"):
        await create(Settings(data_dir=tmp_path, database={"dsn": None}), "127.0.0.1:0")
