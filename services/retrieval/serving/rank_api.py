"""The ranking-model RPCs of RetrievalService (FitRankModel, GetRankStatus,
DisableRankModel, EnableRankModel): contract <-> ranking.Ranking, nothing else. One group
of ``api.RetrievalApi``."""

from __future__ import annotations

from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.timestamps import from_timestamp
from vera.services.retrieval.rank.lifecycle import Ranking, parse_scope
from vera.services.retrieval.serving.convert import record_to_proto


def _scopes(scope_id: str | None) -> list[str]:
    return [scope_id] if scope_id else []


class RankRpcs:
    _ranking: Ranking

    async def FitRankModel(
        self, request: retrieval_pb2.FitRankModelRequest, context
    ) -> retrieval_pb2.FitRankModelResponse:
        scope = parse_scope(request.scope_id)
        record = await self._ranking.fit(
            scope, request.max_rows, from_timestamp(request, "recorded_after")
        )
        return retrieval_pb2.FitRankModelResponse(model=record_to_proto(record, self._ranking))

    async def GetRankStatus(
        self, request: retrieval_pb2.GetRankStatusRequest, context
    ) -> retrieval_pb2.GetRankStatusResponse:
        scope = parse_scope(request.scope_id)
        status = await self._ranking.status(scope)
        return retrieval_pb2.GetRankStatusResponse(
            active=record_to_proto(status.serving, self._ranking),
            unservable=record_to_proto(status.unservable, self._ranking),
            last_fit=record_to_proto(status.last_fit, self._ranking),
            assembler_version=self._ranking.served_version(_scopes(scope)),
            switched_off=record_to_proto(status.switched_off, self._ranking),
        )

    async def DisableRankModel(
        self, request: retrieval_pb2.DisableRankModelRequest, context
    ) -> retrieval_pb2.DisableRankModelResponse:
        scope = parse_scope(request.scope_id)
        disabled = await self._ranking.off(scope)
        return retrieval_pb2.DisableRankModelResponse(
            disabled=record_to_proto(disabled, self._ranking),
            assembler_version=self._ranking.served_version(_scopes(scope)),
        )

    async def EnableRankModel(
        self, request: retrieval_pb2.EnableRankModelRequest, context
    ) -> retrieval_pb2.EnableRankModelResponse:
        scope = parse_scope(request.scope_id)
        enabled = await self._ranking.on(scope)
        return retrieval_pb2.EnableRankModelResponse(
            enabled=record_to_proto(enabled, self._ranking),
            assembler_version=self._ranking.served_version(_scopes(scope)),
        )
