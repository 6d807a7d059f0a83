"""Isolation through the real services, the gateway and the REST app; the REST fixtures
(identity_address, make_api, api) come from tests/conftest.py."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
async def embedder():
    from vera.services.retrieval.models.embedding import MiniLMEmbedder

    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()


@pytest.fixture
async def stack(pg_dsn: str, identity_address: str, tmp_path, embedder):
    from isolation_stack import full_stack

    async with full_stack(pg_dsn, identity_address, tmp_path / "data", embedder) as running:
        yield running
