"""The MiniLM embedder with the real shipped weights: batching keeps each text's vector."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest

from vera.services.retrieval import embedding
from vera.services.retrieval.embedding import MiniLMEmbedder


@pytest.fixture(scope="module")
async def torch_embedder() -> AsyncIterator[MiniLMEmbedder]:
    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()


async def test_batches_of_similar_length_return_vectors_in_the_callers_order(
    torch_embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts are batched by length (less padding); each vector must still come back at
    its text's position, equal to that text embedded alone."""
    monkeypatch.setattr(embedding, "BATCH_SIZE", 3)
    texts = [
        "a much longer text about which database the payments service uses in production",
        "short",
        "a text of middling length about deploys",
        "x",
        "the ledger service stores balances in PostgreSQL and replicates them nightly",
        "tiny one",
        "another sentence of a medium size here",
    ]
    together = np.asarray(await torch_embedder.embed(texts))
    alone = np.asarray([(await torch_embedder.embed([t]))[0] for t in texts])
    assert together.shape == (len(texts), embedding.DIMENSIONS)
    np.testing.assert_allclose(together, alone, atol=1e-4)


async def test_no_texts_no_vectors(torch_embedder: MiniLMEmbedder) -> None:
    assert await torch_embedder.embed([]) == []
