"""The retrieval contract version is derived from what decides ranking: any change to it
changes the version a snapshot pins, and nothing else does."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera.config import RetrievalSettings
from vera.services.retrieval.memory import facts as memory
from vera.services.retrieval.models import rerankers as rerank
from vera.services.retrieval.pipeline import contract
from vera.services.retrieval.pipeline import retriever as pipeline
from vera.services.retrieval.pipeline.retriever import Stages
from vera.services.snapshot.domain import MAX_ASSEMBLER_VERSION

BASE = RetrievalSettings()


def test_the_default_contract_is_readable_and_fits_a_pack():
    version = contract.assembler_version(BASE)
    policy, embedding, index = version.split(";")
    assert policy.startswith(f"{contract.GENERATION}-")
    assert (embedding, index) == ("minilm-l6-v2-int8", "index-edge-hnsw-int8")
    assert contract.assembler_version(RetrievalSettings()) == version
    longest = RetrievalSettings(
        model_path=Path("/" + "m" * 300),
        reranker_path=Path("/" + "r" * 300),
        qdrant_url="https://qdrant.example:6333",
    )
    assert len(contract.assembler_version(longest)) <= MAX_ASSEMBLER_VERSION


@pytest.mark.parametrize(
    "changed",
    [
        {"model_path": Path("/models/other-minilm")},
        {"embedding_precision": "float32"},
        {"reranker_path": Path("/models/cross-encoder")},
        {"rerank_limit": 10},
        {"candidate_pool": 80},
        {"qdrant_url": ":memory:"},
        {"qdrant_url": "http://qdrant:6333"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_ranking_setting_changes_the_version(changed):
    assert contract.assembler_version(BASE.model_copy(update=changed)) != (
        contract.assembler_version(BASE)
    )


@pytest.mark.parametrize("stage", ["dense_context", "entities", "rerank"])
def test_turning_a_stage_off_changes_the_version(stage):
    assert contract.assembler_version(BASE, Stages(**{stage: False})) != (
        contract.assembler_version(BASE)
    )


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (pipeline, "DENSE_WEIGHT"),
        (pipeline, "LEXICAL_WEIGHT"),
        (pipeline, "ENTITY_BONUS"),
        (pipeline, "TIME_BONUS"),
        (pipeline, "REPOSITORY_BOOST"),
        (memory, "K1"),
        (memory, "B"),
        (memory, "CONTEXT_WEIGHT"),
        (rerank, "STATIC_LATE_INTERACTION_WEIGHT"),
    ],
)
def test_a_ranking_constant_changes_the_version(monkeypatch, module, name):
    before = contract.assembler_version(BASE)
    monkeypatch.setattr(module, name, getattr(module, name) + 0.05)
    assert contract.assembler_version(BASE) != before


def test_settings_that_do_not_rank_leave_the_version_alone():
    unrelated = BASE.model_copy(
        update={"embed_threads": 8, "index_poll_seconds": 1.0, "qdrant_collection": "other"}
    )
    assert contract.assembler_version(unrelated) == contract.assembler_version(BASE)
