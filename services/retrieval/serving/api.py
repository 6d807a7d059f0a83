"""The RetrievalService servicer: contract <-> domain, nothing else."""

from __future__ import annotations

from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.services.retrieval.indexing.indexer import ChangeIndexer
from vera.services.retrieval.pipeline.retriever import Retriever
from vera.services.retrieval.rank.learned import ActiveModels
from vera.services.retrieval.rank.lifecycle import Ranking, parse_scope
from vera.services.retrieval.serving.convert import (
    conflict_to_proto,
    filters_from_proto,
    omission_to_proto,
    result_to_proto,
    retrieval_mode_to_proto,
    warning_to_proto,
)
from vera.services.retrieval.serving.rank_api import RankRpcs


class RetrievalApi(RankRpcs, retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, retriever: Retriever, indexer: ChangeIndexer, ranking: Ranking) -> None:
        self._retriever = retriever
        self._indexer = indexer
        self._ranking = ranking

    async def Search(
        self, request: retrieval_pb2.SearchRequest, context
    ) -> retrieval_pb2.SearchResponse:
        scope_ids = list(request.scope_ids)
        outcome = await self._retriever.search(
            scope_ids,
            request.query,
            request.limit,
            filters_from_proto(request.filters),
            learned=await self._pinned(scope_ids, request.assembler_version),
        )
        return retrieval_pb2.SearchResponse(
            results=[result_to_proto(r) for r in outcome.results],
            conflicts=[conflict_to_proto(c) for c in outcome.conflicts],
            freshness_warnings=[warning_to_proto(w) for w in outcome.freshness_warnings],
            omitted=[omission_to_proto(o) for o in outcome.omitted],
            empty_reason=outcome.empty_reason,
            assembler_version=outcome.assembler_version,
            retrieval_mode=retrieval_mode_to_proto(outcome.retrieval_mode),
        )

    async def AssembleContext(
        self, request: retrieval_pb2.AssembleContextRequest, context
    ) -> retrieval_pb2.AssembleContextResponse:
        outcome = await self._retriever.assemble(
            request.scope_id,
            request.query,
            request.limit,
            request.token_budget,
            filters_from_proto(request.filters),
            compact=request.compact_citations,
            learned=await self._pinned([request.scope_id], request.assembler_version),
        )
        return retrieval_pb2.AssembleContextResponse(
            results=[result_to_proto(r) for r in outcome.results],
            conflicts=[conflict_to_proto(c) for c in outcome.conflicts],
            freshness_warnings=[warning_to_proto(w) for w in outcome.freshness_warnings],
            omitted=[omission_to_proto(o) for o in outcome.omitted],
            token_estimate=outcome.token_estimate,
            empty_reason=outcome.empty_reason,
            assembler_version=outcome.assembler_version,
            retrieval_mode=retrieval_mode_to_proto(outcome.retrieval_mode),
        )

    async def _pinned(self, scope_ids: list[str], version: str) -> ActiveModels | None:
        """A replay's ranking models (its pinned contract version); None: what serves."""
        return await self._ranking.pinned(scope_ids, version) if version else None

    async def GetIndexStatus(
        self, request: retrieval_pb2.GetIndexStatusRequest, context
    ) -> retrieval_pb2.GetIndexStatusResponse:
        status = await self._indexer.status()
        return retrieval_pb2.GetIndexStatusResponse(
            indexed_position=status.indexed_position,
            head_position=status.head_position,
            indexed_facts=status.indexed_facts,
            assembler_version=self._ranking.served_version(
                [scope] if (scope := parse_scope(request.scope_id)) else []
            ),
        )
