"""The retrieval contract version a snapshot pins, derived from what decides the order.

``policy;embedding;index``, e.g.
``assembler-3-5f0c9e1a2b3d;minilm-l6-v2-int8;index-edge-hnsw-int8``:

- policy: the pipeline's generation plus a short hash of every ordering input that is not
  the embedding or the index: the stage set, the fusion weights, boosts and floors, the
  BM25F parameters, the candidate pool, and the rerank stage (which reranker, its weights
  at ``reranker_path`` or the static late-interaction blend, and how many it re-scores);
  When a learned ranking model serves (rank/learned.py), its id is one more input, so a
  snapshot taken under one model (or none) replays only with the same one (which
  rank/lifecycle.py's Ranking.pinned finds by this version);
- embedding: the shipped MiniLM, or a hash of the configured ``model_path``, and its
  precision unless float32 (``minilm-l6-v2-int8`` by default);
- index: which vector engine serves the dense leg, and how it searches.

So any change to those, whether a constant in code or a setting, changes the version, and a
snapshot made before it replays as ``unsupported_version`` instead of in a different
order. A change the inputs cannot see (a new algorithm) bumps ``GENERATION``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from vera.config import RetrievalSettings
from vera.services.retrieval.memory import facts as memory
from vera.services.retrieval.models import embedding, rerankers
from vera.services.retrieval.pipeline import retriever
from vera.services.retrieval.rank import learned as learned_rank
from vera.services.retrieval.vectors.payload import MEMORY_LOCATION

GENERATION = "assembler-3"
DEFAULT_EMBEDDING = "minilm-l6-v2"
_HASH_CHARS = 12
_EVERY_STAGE = retriever.Stages()


def _digest(value: Any) -> str:
    body = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:_HASH_CHARS]


def _path(value: Path | None) -> str | None:
    return None if value is None else str(value.expanduser().resolve())


def _order_inputs(settings: RetrievalSettings, stages: retriever.Stages) -> dict[str, Any]:
    if settings.reranker_path is not None:
        reranker: dict[str, Any] = {
            "kind": "cross-encoder",
            "path": _path(settings.reranker_path),
            "max_tokens": rerankers.MAX_TOKENS,
        }
    else:
        reranker = {
            "kind": "static-late-interaction",
            "weight": rerankers.STATIC_LATE_INTERACTION_WEIGHT,
        }
    reranker["limit"] = settings.rerank_limit
    return {
        "stages": dataclasses.asdict(stages),
        "fusion": {
            "dense": retriever.DENSE_WEIGHT,
            "lexical": retriever.LEXICAL_WEIGHT,
            "dense_context": retriever.DENSE_CONTEXT_WEIGHT,
            "entity_bonus": retriever.ENTITY_BONUS,
            "entity_match": "subject-or-parent",
            "time_bonus": retriever.TIME_BONUS,
            "scale": retriever.Fusion().scale,
            "min_dense_similarity": retriever.MIN_DENSE_SIMILARITY,
            "reread_min": retriever.REREAD_MIN,
        },
        "boosts": {
            "repository": retriever.REPOSITORY_BOOST,
            "branch": retriever.BRANCH_BOOST,
            "code_path": retriever.CODE_PATH_BOOST,
        },
        "bm25f": {
            "k1": memory.K1,
            "b": memory.B,
            "context_window": memory.CONTEXT_WINDOW,
            "context_weight": memory.CONTEXT_WEIGHT,
            "common_term_share": memory.COMMON_TERM_SHARE,
            "common_term_min_facts": memory.COMMON_TERM_MIN_FACTS,
        },
        "candidate_pool": settings.candidate_pool,
        "reranker": reranker,
    }


def embedding_version(settings: RetrievalSettings) -> str:
    """Which vectors the settings make (the index records it: other vectors are re-made)."""
    precision = settings.embedding_precision
    if settings.model_path is None:
        return DEFAULT_EMBEDDING if precision == "float32" else f"{DEFAULT_EMBEDDING}-{precision}"
    model = [embedding.MAX_TOKENS, _path(settings.model_path)]
    # float32 keeps the digest it always had, so those snapshots still replay.
    return f"model-{_digest(model if precision == 'float32' else [*model, precision])}"


def _index(settings: RetrievalSettings) -> str:
    if not settings.qdrant_url:
        # int8 copies searched, rescored from the float32 originals (vectors/edge.py's _RESCORE).
        return "index-edge-hnsw-int8"
    if settings.qdrant_url == MEMORY_LOCATION:
        return "index-qdrant-local"
    return "index-qdrant-server"


def assembler_version(
    settings: RetrievalSettings,
    stages: retriever.Stages = _EVERY_STAGE,
    *,
    rank_model: str | None = None,
) -> str:
    """The version retrieval reports with every assembled context (at most 64 characters,
    what a persisted pack and a snapshot store). ``rank_model``: the id of the learned
    ranking model serving the scope; without one the version is what it always was."""
    inputs = _order_inputs(settings, stages)
    if rank_model is not None:
        inputs["learned_rank"] = {"model_id": rank_model, "features": learned_rank.FEATURES}
    policy = f"{GENERATION}-{_digest(inputs)}"
    return f"{policy};{embedding_version(settings)};{_index(settings)}"
