"""The KnowledgeService servicer, declared once from its RPC groups: facts, the graph,
curation and erasure. Each group translates proto <-> domain and nothing else."""

from __future__ import annotations

import asyncio

from vera.db.notify import ChannelWatch
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc
from vera.rpc.audit import AuditPages, list_audit_records

from .bulk_proposal_store import BulkProposalStore
from .community_store import CommunityStore
from .correction_store import CorrectionStore
from .curation_api import CurationRpcs
from .curation_store import CurationStore
from .drift_store import DriftStore
from .erasure_api import ErasureRpcs
from .erasure_store import ErasureStore
from .facts_api import FactRpcs
from .feed_store import FeedStore
from .feedback_store import FeedbackStore
from .graph import Summarizer
from .graph_api import GraphRpcs
from .graph_store import GraphStore
from .ingest_store import IngestStore
from .proposal_store import ProposalStore
from .store import KnowledgeStore


class KnowledgeApi(
    FactRpcs,
    GraphRpcs,
    CurationRpcs,
    ErasureRpcs,
    knowledge_service_pb2_grpc.KnowledgeServiceServicer,
):
    def __init__(
        self,
        store: KnowledgeStore,
        *,
        summarizer: Summarizer,
        max_counted_rows: int,
        changes: ChannelWatch,
        stale_source_days: int,
        refresh_seconds: float = 0.0,
        audit: AuditPages | None = None,
    ) -> None:
        self._audit = audit
        # The stores share the fact reads' pool, one per responsibility.
        self._store = store
        self._ingest = IngestStore(store)
        self._proposals = ProposalStore(store)
        self._bulk_proposals = BulkProposalStore(store)
        self._feedback = FeedbackStore(store)
        self._graph = GraphStore(store, max_counted_rows=max_counted_rows)
        self._corrections = CorrectionStore(store)
        self._feed = FeedStore(store)
        self._communities = CommunityStore(
            store, summarizer, max_counted_rows=max_counted_rows
        )
        self._changes = changes
        self._curation = CurationStore(store, max_counted_rows=max_counted_rows)
        self._drift = DriftStore(store)
        self._erasure = ErasureStore(store)
        self._stale_days = stale_source_days
        self._refresh_seconds = refresh_seconds
        self._refresher: asyncio.Task[None] | None = None

    async def ListAuditRecords(
        self, request: pb.ListAuditRecordsRequest, context
    ) -> pb.ListAuditRecordsResponse:
        return await list_audit_records(self._audit, request, pb)
