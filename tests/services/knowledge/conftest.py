"""The knowledge service the tests here call: real, on the test database (``harness``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from harness import knowledge_settings, knowledge_stub

from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc


@pytest.fixture
async def stub(pg_dsn: str) -> AsyncIterator[knowledge_pb2_grpc.KnowledgeServiceStub]:
    async with knowledge_stub(knowledge_settings(pg_dsn)) as running:
        yield running
