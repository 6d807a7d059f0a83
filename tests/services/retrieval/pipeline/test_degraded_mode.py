"""Degraded retrieval: when the dense leg fails (the vector index or the embedding model), the
pipeline answers from the lexical leg and says so; a failing lexical leg still fails.

Fault injection over fakes of the ports; the real services with a really closed vector index
are tests/isolation/test_degraded_mode_real.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from vera.services.retrieval.domain import (
    Candidate,
    CandidateFeatures,
    Fact,
    Filters,
    IndexQuery,
    RetrievalMode,
)
from vera.services.retrieval.pipeline.retriever import Retriever

SCOPE = "scope-a"
QUERY = "which team owns payments canary-query-7f3a"


class IndexDown(Exception):
    """What an unreachable vector index raises (the adapter's own error type)."""


def fact(key: str) -> Fact:
    return Fact(
        fact_key=key,
        version_id=f"{key}-v1",
        scope_id=SCOPE,
        subject=f"subject {key}",
        predicate="owned_by",
        object=f"object {key}",
        trust_tier=1,
        authority=0.8,
    )


@dataclass
class Embedder:
    broken: bool = False
    dimensions: int = 3

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.broken:
            raise RuntimeError("the model session is gone")
        return [[1.0, 0.0, 0.0] for _ in texts]


@dataclass
class Vectors:
    hits: list[Candidate]
    broken: bool = False
    searched: int = 0

    async def search(self, vector, query: IndexQuery, limit: int) -> list[Candidate]:
        self.searched += 1
        if self.broken:
            raise IndexDown("connection refused")
        return self.hits[:limit]


@dataclass
class Lexical:
    """The lexical leg, and the features of every known version (recording the query
    vector it was handed)."""

    hits: list[Candidate]
    broken: bool = False
    vectors: list[list[float]] = field(default_factory=list)

    async def search(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        if self.broken:
            raise ConnectionError("database down")
        return self.hits[:limit]

    async def has_documents(self, query: IndexQuery, *, with_attributes: bool) -> bool:
        return True

    async def features(self, scope_ids, version_ids, vector, query_text, query=None):
        self.vectors.append(list(vector))
        return {v: CandidateFeatures(dense=0.5) for v in version_ids}


@dataclass
class Facts:
    facts: dict[str, Fact]

    async def batch_get_facts(self, scope_ids, fact_keys, as_of, known_as_of) -> list[Fact]:
        return [self.facts[k] for k in fact_keys if k in self.facts]


@dataclass
class Parts:
    embedder: Embedder
    vectors: Vectors
    lexical: Lexical
    retriever: Retriever


def parts() -> Parts:
    """'dense-only' is found by the dense leg alone, 'both' by both, 'lexical' lexically."""
    embedder = Embedder()
    vectors = Vectors(
        [Candidate("dense-only", "dense-only-v1", 0.9), Candidate("both", "both-v1", 0.8)]
    )
    lexical = Lexical([Candidate("both", "both-v1", 3.0), Candidate("lexical", "lexical-v1", 2.0)])
    retriever = Retriever(
        embedder,
        vectors,
        lexical,
        Facts({k: fact(k) for k in ("dense-only", "both", "lexical")}),
        candidate_pool=50,
        assembler_version="assembler-test",
    )
    return Parts(embedder, vectors, lexical, retriever)


def keys(outcome) -> set[str]:
    return {r.fact.fact_key for r in outcome.results}


async def test_a_healthy_dense_leg_answers_hybrid():
    p = parts()
    searched = await p.retriever.search([SCOPE], QUERY, 10, Filters())
    assembled = await p.retriever.assemble(SCOPE, QUERY, 10, 2000, Filters(), compact=False)
    for outcome in (searched, assembled):
        assert outcome.retrieval_mode == RetrievalMode.HYBRID
        assert keys(outcome) == {"dense-only", "both", "lexical"}


async def test_a_failing_vector_index_degrades_to_the_lexical_leg(caplog):
    p = parts()
    p.vectors.broken = True
    with caplog.at_level(logging.WARNING):
        searched = await p.retriever.search([SCOPE], QUERY, 10, Filters())
        assembled = await p.retriever.assemble(SCOPE, QUERY, 10, 2000, Filters(), compact=False)
    for outcome in (searched, assembled):
        assert outcome.retrieval_mode == RetrievalMode.LEXICAL_ONLY
        assert keys(outcome) == {"both", "lexical"}
        assert outcome.empty_reason == ""
    assert p.vectors.searched == 2
    # The embedder still worked: the features score the lexical candidates with the real
    # query vector (exact cosine from memory), not a blank one.
    assert p.lexical.vectors == [[1.0, 0.0, 0.0]] * 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all("IndexDown" in r.getMessage() for r in warnings)
    assert not any("canary-query-7f3a" in r.getMessage() for r in caplog.records)


async def test_a_failing_embedder_degrades_without_searching_vectors():
    p = parts()
    p.embedder.broken = True
    outcome = await p.retriever.search([SCOPE], QUERY, 10, Filters())
    assert outcome.retrieval_mode == RetrievalMode.LEXICAL_ONLY
    assert keys(outcome) == {"both", "lexical"}
    assert p.vectors.searched == 0
    assert p.lexical.vectors == [[0.0, 0.0, 0.0]]  # no dense evidence, still the features


async def test_degraded_with_no_lexical_match_is_an_empty_answer_not_an_error():
    p = parts()
    p.vectors.broken = True
    p.lexical.hits = []
    outcome = await p.retriever.search([SCOPE], QUERY, 10, Filters())
    assert (outcome.results, outcome.retrieval_mode) == ([], RetrievalMode.LEXICAL_ONLY)
    assert outcome.empty_reason == "no_match"


async def test_a_failing_lexical_leg_still_fails_the_call():
    # Only the dense leg degrades: without the lexical leg there is nothing to answer from.
    p = parts()
    p.lexical.broken = True
    with pytest.raises(ConnectionError):
        await p.retriever.search([SCOPE], QUERY, 10, Filters())
