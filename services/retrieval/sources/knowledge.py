"""FactSource over knowledge's gRPC API (ListChanges, BatchGetFacts)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import grpc

from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.timestamps import to_timestamp
from vera.services.retrieval.domain import ChangePage, Fact
from vera.services.retrieval.sources.convert import change_from_proto, fact_from_proto


class KnowledgeFactSource:
    """Calls go through a channel from ``vera.rpc.client.open_channel``: each has a deadline
    and failures arrive as VeraError."""

    def __init__(self, channel: grpc.aio.Channel, deadline_seconds: float) -> None:
        self._stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        self._deadline_seconds = deadline_seconds

    async def list_changes(
        self, after_position: int, page_size: int, wait_seconds: float = 0.0
    ) -> ChangePage:
        request = knowledge_pb2.ListChangesRequest(
            after_position=after_position, page_size=page_size
        )
        timeout = None  # the channel's deadline
        if wait_seconds > 0:
            request.max_wait.FromTimedelta(timedelta(seconds=wait_seconds))
            timeout = wait_seconds + self._deadline_seconds
        response = await self._stub.ListChanges(request, timeout=timeout)
        return ChangePage(
            changes=[change_from_proto(c) for c in response.changes],
            head_position=response.head_position,
        )

    async def batch_get_facts(
        self,
        scope_ids: Sequence[str],
        fact_keys: Sequence[str],
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> list[Fact]:
        if not fact_keys:
            return []
        response = await self._stub.BatchGetFacts(
            knowledge_pb2.BatchGetFactsRequest(
                scope_ids=list(scope_ids),
                fact_keys=list(fact_keys),
                as_of=to_timestamp(as_of),
                known_as_of=to_timestamp(known_as_of),
            )
        )
        return [fact_from_proto(f) for f in response.facts]
