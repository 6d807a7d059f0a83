"""Retrieval's shared test fakes: the ports' fakes the pipeline runs on (``harness``) and
an in-process knowledge service serving a change log (``fake_knowledge``)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.server import RunningServer, ServiceBinding, create_server
from vera.rpc.timestamps import to_timestamp
from vera.services.retrieval.domain import Candidate, Fact, IndexQuery
from vera.services.retrieval.pipeline.retriever import Fusion, Retriever

# --- the pipeline's ports ----------------------------------------------------------------

NOW = datetime(2025, 6, 1, tzinfo=UTC)
SCOPE = "scope-a"
CONTRACT = "assembler-test"
OTHER = "scope-b"


def fact(key: str, **fields) -> Fact:
    defaults = dict(
        fact_key=key,
        version_id=f"{key}-v1",
        scope_id=SCOPE,
        subject=f"subject {key}",
        predicate="uses",
        object=f"object {key}",
        trust_tier=1,
        authority=0.8,
    )
    defaults.update(fields)
    return Fact(**defaults)


class FakeEmbedder:
    dimensions = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[1.0, 0.0, 0.0] for _ in texts]


@dataclass
class FakeVectors:
    hits: list[Candidate] = field(default_factory=list)
    queries: list[IndexQuery] = field(default_factory=list)

    async def search(self, vector, query: IndexQuery, limit: int) -> list[Candidate]:
        self.queries.append(query)
        return self.hits[:limit]


@dataclass
class FakeLexical:
    hits: list[Candidate] = field(default_factory=list)
    in_scope: bool = True
    matching_attributes: bool = True

    async def search(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        return self.hits[:limit]

    async def has_documents(self, query: IndexQuery, *, with_attributes: bool) -> bool:
        return self.in_scope and (self.matching_attributes or not with_attributes)

    async def features(self, scope_ids, version_ids, vector, query_text, query=None):
        return {}  # no in-process memory: the legs' own scores only


@dataclass
class FakeFacts:
    facts: dict[str, Fact] = field(default_factory=dict)
    calls: list[tuple] = field(default_factory=list)

    async def batch_get_facts(self, scope_ids, fact_keys, as_of, known_as_of) -> list[Fact]:
        self.calls.append((tuple(scope_ids), tuple(fact_keys), as_of, known_as_of))
        return [
            self.facts[k]
            for k in fact_keys
            if k in self.facts and self.facts[k].scope_id in scope_ids
        ]


@dataclass
class Harness:
    vectors: FakeVectors
    lexical: FakeLexical
    facts: FakeFacts
    retriever: Retriever


def harness(
    facts: Sequence[Fact],
    dense: dict[str, float] | None = None,
    lexical: dict[str, float] | None = None,
    fusion: Fusion | None = None,
) -> Harness:
    vectors = FakeVectors([Candidate(k, f"{k}-v1", s) for k, s in (dense or {}).items()])
    lex = FakeLexical([Candidate(k, f"{k}-v1", s) for k, s in (lexical or {}).items()])
    source = FakeFacts({f.fact_key: f for f in facts})
    retriever = Retriever(
        FakeEmbedder(),
        vectors,
        lex,
        source,
        candidate_pool=50,
        clock=lambda: NOW,
        fusion=fusion or Fusion(),
        assembler_version=CONTRACT,
    )
    return Harness(vectors, lex, source, retriever)


def keys(outcome) -> list[str]:
    return [r.fact.fact_key for r in outcome.results]


# --- a knowledge service -----------------------------------------------------------------

SCOPE_A = str(uuid.uuid4())
SCOPE_B = str(uuid.uuid4())
RECORDED = datetime(2025, 1, 1, tzinfo=UTC)

FACTS_A = [
    ("payments-api", "owned_by", "the Payments Platform team (#payments-oncall)"),
    ("billing-service", "deployed_with", "Argo CD rollouts from the infra repository"),
    ("checkout-web", "uses_database", "PostgreSQL 16 on Amazon RDS"),
    ("auth-service", "token_lifetime", "access tokens expire after 15 minutes"),
    ("search-indexer", "runs_on", "a nightly Kubernetes CronJob at 02:00 UTC"),
    ("frontend", "style_guide", "components use Tailwind utility classes"),
]
# Same subject and predicate as a scope-A fact, in a scope the caller cannot read.
FACTS_B = [("payments-api", "owned_by", "the secret skunkworks squad")]


def make_fact(scope: str, n: int, subject: str, predicate: str, obj: str, **extra):
    key = f"{scope[:8]}-{n}"
    return knowledge_pb2.Fact(
        fact_key=key,
        version_id=extra.pop("version_id", f"{key}-v1"),
        scope_id=scope,
        subject=subject,
        predicate=predicate,
        object=obj,
        state=knowledge_pb2.FACT_STATE_ACTIVE,
        trust_tier=1,
        authority=0.9,
        recorded_at=to_timestamp(extra.pop("recorded_at", RECORDED)),
        document_type="adr",
        source_type="adr",
        citations=[
            knowledge_pb2.Citation(
                source_id=f"adr-{n}",
                locator="L1-L5",
                title=f"ADR {n}",
                excerpt=f"We decided that {subject} {predicate.replace('_', ' ')} {obj}.",
                verification=knowledge_pb2.VERIFICATION_STATE_VERIFIED,
                observed_at=to_timestamp(datetime.now(UTC)),
            )
        ],
        **extra,
    )


class FakeKnowledge(knowledge_pb2_grpc.KnowledgeServiceServicer):
    """The change log and the current version of each fact, in memory."""

    def __init__(self) -> None:
        self.changes: list[knowledge_pb2.Change] = []
        self.current: dict[str, knowledge_pb2.Fact] = {}

    def record(self, fact: knowledge_pb2.Fact) -> None:
        if fact.state in (knowledge_pb2.FACT_STATE_RETRACTED, knowledge_pb2.FACT_STATE_SUPERSEDED):
            self.current.pop(fact.fact_key, None)
        else:
            self.current[fact.fact_key] = fact
        self.changes.append(
            knowledge_pb2.Change(
                position=len(self.changes) + 1,
                kind=knowledge_pb2.CHANGE_KIND_FACT_UPSERTED,
                fact=fact,
            )
        )

    async def ListChanges(self, request, context):
        page = [c for c in self.changes if c.position > request.after_position]
        return knowledge_pb2.ListChangesResponse(
            changes=page[: request.page_size], head_position=len(self.changes)
        )

    async def BatchGetFacts(self, request, context):
        scopes = set(request.scope_ids)
        return knowledge_pb2.BatchGetFactsResponse(
            facts=[
                self.current[key]
                for key in request.fact_keys
                if key in self.current and self.current[key].scope_id in scopes
            ]
        )


@dataclass
class Stack:
    knowledge: FakeKnowledge
    retrieval: retrieval_pb2_grpc.RetrievalServiceStub

    async def wait_indexed(self, timeout: float = 20.0) -> retrieval_pb2.GetIndexStatusResponse:
        head = len(self.knowledge.changes)
        deadline = time.monotonic() + timeout
        while True:
            status = await self.retrieval.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
            if status.indexed_position >= head:
                return status
            assert time.monotonic() < deadline, f"indexer stuck at {status}"
            await asyncio.sleep(0.05)


async def fake_knowledge(*facts: tuple[str, list]) -> tuple[FakeKnowledge, RunningServer]:
    """A started fake knowledge service holding each (scope, triples) pair's facts."""
    knowledge = FakeKnowledge()
    for scope, triples in facts:
        for n, triple in enumerate(triples):
            knowledge.record(make_fact(scope, n, *triple))
    fake = create_server(
        [
            ServiceBinding(
                "vera.knowledge.v1.KnowledgeService",
                knowledge,
                knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await fake.server.start()
    return knowledge, fake
