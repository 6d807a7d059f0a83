"""The KnowledgeService servicer, declared once from its RPC groups: facts, the graph,
curation and erasure. Each group translates proto <-> domain and nothing else."""

from __future__ import annotations

import asyncio

from vera.db.notify import ChannelWatch
from vera.knowledge.v1 import knowledge_service_pb2_grpc

from .curation_api import CurationRpcs
from .curation_store import CurationStore
from .erasure import ErasureRpcs
from .facts_api import FactRpcs
from .graph_api import GraphRpcs
from .graph_store import GraphStore
from .store import KnowledgeStore


class KnowledgeServicer(
    FactRpcs,
    GraphRpcs,
    CurationRpcs,
    ErasureRpcs,
    knowledge_service_pb2_grpc.KnowledgeServiceServicer,
):
    def __init__(
        self,
        store: KnowledgeStore,
        graph: GraphStore,
        *,
        changes: ChannelWatch,
        stale_source_days: int,
        refresh_seconds: float = 0.0,
        max_counted_rows: int = 1000,
    ) -> None:
        self._store = store
        self._graph = graph
        self._changes = changes
        self._curation = CurationStore(store, max_counted_rows=max_counted_rows)
        self._stale_days = stale_source_days
        self._refresh_seconds = refresh_seconds
        self._refresher: asyncio.Task[None] | None = None
