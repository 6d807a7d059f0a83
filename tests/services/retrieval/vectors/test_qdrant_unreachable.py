"""A Qdrant server that refuses connections does not take retrieval down: the real
retrieval service (real PostgreSQL, the real MiniLM embedder) starts against it and
answers searches and context assembly from the lexical index, marked LEXICAL_ONLY.

The lexical documents come from an earlier run of the same service on the embedded vector
engine (a stand-in knowledge service serves the change log), as after a Qdrant outage that
began while retrieval was restarting."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from vera.config import Settings
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server
from vera.services.retrieval.models.embedding import MiniLMEmbedder
from vera.services.retrieval.server import create

SCOPE = str(uuid.uuid4())
QUERY = "which team owns the payments api"


class ChangeLog(knowledge_pb2_grpc.KnowledgeServiceServicer):
    """Two facts in knowledge's change log, and their current versions."""

    def __init__(self) -> None:
        self.facts = {
            f"f{n}": knowledge_pb2.Fact(
                fact_key=f"f{n}",
                version_id=str(uuid.uuid4()),
                scope_id=SCOPE,
                subject=subject,
                predicate=predicate,
                object=obj,
                state=knowledge_pb2.FACT_STATE_ACTIVE,
                trust_tier=1,
                authority=0.9,
            )
            for n, (subject, predicate, obj) in enumerate(
                [
                    ("payments-api", "owned_by", "the Payments Platform team"),
                    ("checkout-web", "uses_database", "PostgreSQL 16"),
                ]
            )
        }

    async def ListChanges(self, request, context):
        changes = [
            knowledge_pb2.Change(
                position=n, kind=knowledge_pb2.CHANGE_KIND_FACT_UPSERTED, fact=fact
            )
            for n, fact in enumerate(self.facts.values(), start=1)
            if n > request.after_position
        ]
        return knowledge_pb2.ListChangesResponse(changes=changes, head_position=len(self.facts))

    async def BatchGetFacts(self, request, context):
        return knowledge_pb2.BatchGetFactsResponse(
            facts=[self.facts[k] for k in request.fact_keys if k in self.facts]
        )


@pytest.fixture(scope="module")
async def embedder() -> AsyncIterator[MiniLMEmbedder]:
    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback port that is bound but never listens: every connection is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@contextlib.asynccontextmanager
async def retrieval(
    settings: Settings, embedder: MiniLMEmbedder
) -> AsyncIterator[retrieval_pb2_grpc.RetrievalServiceStub]:
    hosted = await create(settings, "127.0.0.1:0", embedder=embedder)
    await hosted.running.server.start()
    channel = open_channel(f"127.0.0.1:{hosted.running.port}", 30.0)
    try:
        yield retrieval_pb2_grpc.RetrievalServiceStub(channel)
    finally:
        await channel.close()
        await hosted.running.stop(grace=1.0)
        await hosted.aclose()


# qdrant-client's own start-up version check warns (from a thread) that it got no answer.
@pytest.mark.filterwarnings("ignore:Failed to obtain server version:UserWarning")
async def test_retrieval_starts_and_answers_lexically_while_qdrant_refuses(
    pg_dsn, tmp_path, embedder, refused_url
) -> None:
    knowledge = create_server(
        [
            ServiceBinding(
                "vera.knowledge.v1.KnowledgeService",
                ChangeLog(),
                knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await knowledge.server.start()
    base = {
        "database": {"dsn": pg_dsn},
        "services": {"knowledge": f"127.0.0.1:{knowledge.port}"},
    }
    try:
        embedded = Settings(data_dir=tmp_path, retrieval={"index_poll_seconds": 0.02}, **base)
        async with retrieval(embedded, embedder) as stub:
            deadline = time.monotonic() + 30
            while (
                await stub.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
            ).indexed_position < 2:
                assert time.monotonic() < deadline, "the first run never indexed the log"
                await asyncio.sleep(0.05)
            healthy = await stub.Search(
                retrieval_pb2.SearchRequest(scope_ids=[SCOPE], query=QUERY, limit=5)
            )
            assert healthy.retrieval_mode == retrieval_pb2.RETRIEVAL_MODE_HYBRID

        unreachable = Settings(
            data_dir=tmp_path / "second",
            retrieval={"qdrant_url": refused_url, "index_poll_seconds": 0.02},
            **base,
        )
        async with retrieval(unreachable, embedder) as stub:
            searched = await stub.Search(
                retrieval_pb2.SearchRequest(scope_ids=[SCOPE], query=QUERY, limit=5)
            )
            assembled = await stub.AssembleContext(
                retrieval_pb2.AssembleContextRequest(scope_id=SCOPE, query=QUERY, limit=5)
            )
            for response in (searched, assembled):
                assert response.retrieval_mode == retrieval_pb2.RETRIEVAL_MODE_LEXICAL_ONLY
                assert response.results[0].fact.fact_key == "f0"
                assert response.results[0].signals["lexical"] > 0
    finally:
        await knowledge.stop(0)
