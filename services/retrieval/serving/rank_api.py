"""The ranking-model RPCs of RetrievalService (FitRankModel, GetRankStatus,
DisableRankModel, EnableRankModel): contract <-> ranking.Ranking, nothing else. One group
of ``api.RetrievalApi``."""

from __future__ import annotations

from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.timestamps import from_timestamp, to_timestamp
from vera.services.retrieval.rank.learned import (
    CUT,
    HIT_AT,
    Figures,
    FitOutcome,
    Guard,
    NotServed,
    RankRecord,
)
from vera.services.retrieval.rank.lifecycle import Ranking, parse_scope

OUTCOMES = {
    FitOutcome.ACTIVATED: retrieval_pb2.RANK_FIT_OUTCOME_ACTIVATED,
    FitOutcome.TOO_LITTLE_FEEDBACK: retrieval_pb2.RANK_FIT_OUTCOME_TOO_LITTLE_FEEDBACK,
    FitOutcome.ONE_SIDED_FEEDBACK: retrieval_pb2.RANK_FIT_OUTCOME_ONE_SIDED_FEEDBACK,
    FitOutcome.NOT_BETTER: retrieval_pb2.RANK_FIT_OUTCOME_NOT_BETTER,
    FitOutcome.WORSE_AT_TOP: retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_TOP,
    FitOutcome.WORSE_AT_RECALL: retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_RECALL,
}
NOT_SERVED = {
    None: retrieval_pb2.RANK_NOT_SERVED_REASON_UNSPECIFIED,
    NotServed.OTHER_FEATURES: retrieval_pb2.RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES,
}


def _figures(figures: Figures) -> retrieval_pb2.RankFigures:
    return retrieval_pb2.RankFigures(
        queries=figures.queries, hit=figures.hit, recall=figures.recall, mrr=figures.mrr
    )


def _guard(guard: Guard | None) -> retrieval_pb2.RankGuard | None:
    if guard is None:
        return None
    return retrieval_pb2.RankGuard(
        switched_off_time=to_timestamp(guard.checked_at),
        model=_figures(guard.model),
        hand=_figures(guard.hand),
    )


def record_to_proto(record: RankRecord | None, ranking: Ranking) -> retrieval_pb2.RankModel | None:
    if record is None:
        return None
    return retrieval_pb2.RankModel(
        model_id=record.model_id,
        scope_id=record.scope_id or "",
        outcome=OUTCOMES[record.outcome],
        active=record.serves,
        training_rows=record.training_rows,
        training_queries=record.training_queries,
        evaluated_packs=record.evaluated_packs,
        metric=record.metric,
        model_figure=record.model_figure,
        hand_figure=record.hand_figure,
        trained_at=to_timestamp(record.trained_at),
        assembler_version=ranking.version_of(record) if record.serves else "",
        model_hit=record.model_hit,
        hand_hit=record.hand_hit,
        hit_at=HIT_AT,
        not_served_reason=NOT_SERVED[record.not_served if record.active else None],
        model_recall=record.model_recall,
        hand_recall=record.hand_recall,
        replayed_queries=record.replayed_queries or 0,
        cut=CUT,
        switched_off=_guard(record.switched_off),
    )


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
