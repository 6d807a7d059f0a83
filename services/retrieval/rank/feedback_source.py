"""Ranking feedback over knowledge's gRPC API (ListRankingFeedback): the rows a fit may
learn from, newest first, already restricted there to server-attributed result-level
feedback; nothing here widens that. A row's query text is for replaying it (rank/lifecycle.py),
never for logs."""

from __future__ import annotations

from datetime import datetime

import grpc

from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.timestamps import from_timestamp, to_timestamp
from vera.services.retrieval.rank.learned import FeedbackRow

PAGE_SIZE = 1000


class KnowledgeFeedbackSource:
    """Calls go through a channel from ``vera.rpc.client.open_channel`` (deadline per
    call, failures as VeraError)."""

    def __init__(self, channel: grpc.aio.Channel, *, max_rows_per_principal: int = 0) -> None:
        """``max_rows_per_principal``: knowledge hands over at most each principal's newest
        that many rows (0: no cap), so no one account's feedback dominates a fit."""
        self._stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        self._per_principal = max_rows_per_principal

    async def newest(
        self, scope_id: str | None, recorded_after: datetime | None, limit: int
    ) -> list[FeedbackRow]:
        """Up to ``limit`` rows, newest first, of packs assembled in ``scope_id`` (every
        scope when None), recorded at or after ``recorded_after``."""
        rows: list[FeedbackRow] = []
        token = ""
        while len(rows) < limit:
            response = await self._stub.ListRankingFeedback(
                knowledge_pb2.ListRankingFeedbackRequest(
                    pack_scope_id=scope_id or "",
                    recorded_after=to_timestamp(recorded_after),
                    page_size=min(PAGE_SIZE, limit - len(rows)),
                    page_token=token,
                    max_rows_per_principal=self._per_principal,
                )
            )
            rows += [
                FeedbackRow(
                    pack_id=f.pack_id,
                    query_digest=f.query_digest,
                    rank=f.rank,
                    signal=f.signal,
                    signals=dict(f.signal_vector),
                    recorded_at=from_timestamp(f, "recorded_at"),
                    query=f.query,
                    scope_id=f.pack_scope_id,
                    fact_key=f.fact_key,
                )
                for f in response.feedback
            ]
            token = response.next_page_token
            if not token:
                break
        return rows
