"""Retrieval's shared fixtures (its shared fakes are in retrieval_fakes.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from vera.services.retrieval.models.embedding import MiniLMEmbedder


@pytest.fixture(scope="session")
async def embedder() -> AsyncIterator[MiniLMEmbedder]:
    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()
