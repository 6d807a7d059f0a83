"""Rerankers for the pipeline's rerank stage (ports.Reranker): a short list only.

- ``CrossEncoderReranker``: a local cross-encoder directory (transformers format,
  ``VERA_RETRIEVAL__RERANKER_PATH``), never fetched from a hub; its score is the model's
  relevance logit. Runs on its own single worker thread, never on the event loop.
- ``LateInteractionReranker``: needs no extra weights. MaxSim (ColBERT-style late
  interaction) over MiniLM token vectors of the query and each short-listed fact,
  blended with the fused score: ``fused + weight * maxsim``. The default stage uses the
  static (input) token vectors (``StaticTokenVectors``: a table lookup, ~3 ms per query);
  the contextual ones need a forward pass over the short list (hundreds of ms on CPU)
  and, calibrated out of fold, do not beat the static ones. The benchmark's ablation
  (bench/ablation.py) measures both, with the blend weight calibrated out of fold
  (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

DEFAULT_LIMIT = 20
MAX_TOKENS = 256
PATH_VARIABLE = "VERA_RETRIEVAL__RERANKER_PATH"
# fused + weight * maxsim (the naive weight; bench/ablation.py also calibrates one).
LATE_INTERACTION_WEIGHT = 0.5
# The default stage's weight over static token vectors: on LoCoMo dev the out-of-fold
# calibration picks 0.2 on one fold of conversations and 0.3 on the other.
STATIC_LATE_INTERACTION_WEIGHT = 0.25


class RerankerUnavailable(RuntimeError):
    """A configured reranker could not be loaded (raised at start, never per query)."""


def short_list(keys: Sequence[str], texts: Mapping[str, str], limit: int) -> list[str]:
    """The first ``limit`` keys (best fused first) that have a text to read."""
    return [k for k in keys if k in texts][:limit]


class CrossEncoderReranker:
    """Scores (query, fact text) pairs with a sequence-classification cross-encoder."""

    def __init__(self, tokenizer, model, executor: ThreadPoolExecutor, *, limit: int) -> None:
        self._tokenizer = tokenizer
        self._model = model
        self._executor = executor
        self.limit = limit

    @classmethod
    def load_sync(
        cls, path: Path, *, limit: int = DEFAULT_LIMIT, threads: int = 1,
        executor: ThreadPoolExecutor | None = None,
    ) -> CrossEncoderReranker:
        """Blocking load; a missing or unreadable model fails naming the setting."""
        try:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ModuleNotFoundError as exc:
            raise RerankerUnavailable(
                f"{PATH_VARIABLE}: a cross-encoder runs on PyTorch, which serving does not "
                f"install: pip install 'vera-memory[torch]' (no module {exc.name!r})"
            ) from exc

        hf_logging.disable_progress_bar()
        path = Path(path)
        if not path.is_dir():
            raise RerankerUnavailable(f"{PATH_VARIABLE}: {path} is not a model directory")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModelForSequenceClassification.from_pretrained(
                str(path), local_files_only=True
            ).eval()
        except Exception as exc:
            raise RerankerUnavailable(
                f"{PATH_VARIABLE}: cannot load a cross-encoder from {path} "
                f"({type(exc).__name__})"
            ) from exc
        torch.set_num_threads(threads)
        executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-rerank")
        return cls(tokenizer, model, executor, limit=limit)

    @classmethod
    async def load(
        cls, path: Path, *, limit: int = DEFAULT_LIMIT, threads: int = 1
    ) -> CrossEncoderReranker:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-rerank")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                executor, lambda: cls.load_sync(path, limit=limit, threads=threads,
                                                executor=executor)
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise

    def score_sync(self, query: str, texts: Sequence[str]) -> list[float]:
        """The relevance logit of each (query, text) pair (the last label's when several)."""
        import torch

        if not texts:
            return []
        with torch.inference_mode():
            encoded = self._tokenizer(
                [query] * len(texts), list(texts), padding=True, truncation=True,
                max_length=MAX_TOKENS, return_tensors="pt",
            )
            logits = self._model(**encoded).logits
        return logits[:, -1].float().tolist()

    async def rerank(
        self,
        query: str,
        keys: Sequence[str],
        fused: Mapping[str, tuple[float, float, float]],
        texts: Mapping[str, str],
    ) -> dict[str, float]:
        chosen = short_list(keys, texts, self.limit)
        loop = asyncio.get_running_loop()
        scores = await loop.run_in_executor(
            self._executor, self.score_sync, query, [texts[k] for k in chosen]
        )
        return dict(zip(chosen, scores, strict=True))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class TokenEmbedder(Protocol):
    """What late interaction needs: token vectors, from the embedder or a static table."""

    async def token_embeddings(self, texts: Sequence[str]) -> list: ...


def maxsim(query_tokens, doc_tokens) -> float:
    """Mean over query tokens of the best cosine with any document token."""
    if len(query_tokens) == 0 or len(doc_tokens) == 0:
        return 0.0
    return float((query_tokens @ doc_tokens.T).max(axis=1).mean())


class LateInteractionReranker:
    """``fused + weight * maxsim`` over MiniLM token embeddings (no extra weights); one
    forward pass over the query and the short list, on the embedder's thread."""

    def __init__(
        self, embedder: TokenEmbedder, *, limit: int = DEFAULT_LIMIT,
        weight: float = LATE_INTERACTION_WEIGHT,
    ) -> None:
        self._embedder = embedder
        self.limit = limit
        self.weight = weight
        # Fact text -> token vectors, when a caller (the benchmark) supplies a dict: encoding
        # the short list is the whole cost (a forward pass over ~20 facts per query).
        self.cache: dict | None = None

    async def maxsim_scores(
        self, query: str, keys: Sequence[str], texts: Mapping[str, str]
    ) -> dict[str, float]:
        chosen = short_list(keys, texts, self.limit)
        if not chosen:
            return {}
        cache = self.cache if self.cache is not None else {}
        missing = list(dict.fromkeys(texts[k] for k in chosen if texts[k] not in cache))
        tokens = await self._embedder.token_embeddings([query, *missing])
        found = {**cache, **dict(zip(missing, tokens[1:], strict=True))}
        if self.cache is not None:
            self.cache.update(found)
        return {k: maxsim(tokens[0], found[texts[k]]) for k in chosen}

    async def rerank(
        self,
        query: str,
        keys: Sequence[str],
        fused: Mapping[str, tuple[float, float, float]],
        texts: Mapping[str, str],
    ) -> dict[str, float]:
        sims = await self.maxsim_scores(query, keys, texts)
        return {k: fused[k][2] + self.weight * s for k, s in sims.items()}

    def close(self) -> None:
        """Nothing to release: it has no thread of its own."""


class StaticTokenVectors:
    """MiniLM's input (non-contextual) token embeddings, L2-normalized: token vectors for
    late interaction without a forward pass (tokenizing and a table lookup, off the loop)."""

    def __init__(self, tokenizer, table) -> None:
        self._tokenizer = tokenizer
        self._table = table

    @classmethod
    def load_sync(cls, model_path: Path | None = None) -> StaticTokenVectors:
        """Reads the embedding table straight from the safetensors file (no torch)."""
        import numpy as np
        from safetensors import safe_open

        from vera.services.retrieval.models.embedding import MiniLMTokenizer, default_model_path

        path = Path(model_path or default_model_path())
        tokenizer = MiniLMTokenizer(path)
        with safe_open(str(path / "model.safetensors"), "np") as weights:
            name = next(k for k in weights.keys() if k.endswith("word_embeddings.weight"))
            table = weights.get_tensor(name).astype(np.float32)
        table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
        return cls(tokenizer, table)

    def _tokens_sync(self, texts: Sequence[str]) -> list:
        return [self._table[row] for row in self._tokenizer.ids(texts)]

    async def token_embeddings(self, texts: Sequence[str]) -> list:
        return await asyncio.to_thread(self._tokens_sync, texts)


async def load_reranker(
    cross_encoder_path: Path | None, model_path: Path | None, *, limit: int = DEFAULT_LIMIT
) -> CrossEncoderReranker | LateInteractionReranker:
    """The configured cross-encoder, else late interaction over MiniLM's static token
    vectors (the weights the embedder already ships)."""
    if cross_encoder_path is not None:
        return await CrossEncoderReranker.load(cross_encoder_path, limit=limit)
    tokens = await asyncio.to_thread(StaticTokenVectors.load_sync, model_path)
    return LateInteractionReranker(tokens, limit=limit, weight=STATIC_LATE_INTERACTION_WEIGHT)
