"""Entry point of the knowledge service: migrate, pool, servicer, bound gRPC server."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from vera.config import Settings
from vera.db.audit import AuditTrail
from vera.db.notify import ChannelWatch
from vera.db.pool import open_service_database, service_dsn
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.observability import audit_head
from vera.observability.service_metrics import ServiceMetrics
from vera.resource_stack import ResourceStack
from vera.rpc.server import HostedService, ServiceBinding, create_server

from .api import KnowledgeApi
from .curation_store import CurationStore
from .domain import load_ontology
from .graph import ExtractiveSummarizer
from .store import KnowledgeStore

SERVICE_NAME = "vera.knowledge.v1.KnowledgeService"
SCHEMA = "knowledge"
# How often the metrics' view of the review queue is read again.
QUEUE_POLL_SECONDS = 15.0

log = logging.getLogger(__name__)


async def create(settings: Settings, address: str) -> HostedService:
    """Builds the bound (not yet started) knowledge server; ``aclose`` closes the pool."""
    ontology = load_ontology(settings.knowledge.ontology_path)
    async with ResourceStack("knowledge") as resources:
        pool = await open_service_database(settings, SCHEMA, "vera.services.knowledge")
        resources.closing(pool.close)
        stale_days = settings.knowledge.stale_source_days
        store = KnowledgeStore(pool, ontology, stale_source_days=stale_days)
        # The outbox trigger (migration 0008) notifies this channel; ListChanges long-polls it.
        changes = ChannelWatch(service_dsn(settings), f"{SCHEMA}.outbox")
        # Communities: derived on demand (DeriveCommunities) and by a background refresh of
        # scopes whose change log moved; an LLM summarizer would replace the extractive one.
        servicer = KnowledgeApi(
            store,
            summarizer=ExtractiveSummarizer(),
            max_counted_rows=settings.knowledge.max_counted_rows,
            changes=changes,
            stale_source_days=stale_days,
            refresh_seconds=settings.knowledge.community_refresh_seconds,
            audit=AuditTrail(pool),
        )
        register = knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server
        running = create_server(
            [ServiceBinding(SERVICE_NAME, servicer, register)], address, settings
        )
        running.metrics.pool(SCHEMA, pool)
        servicer.start_refresher()
        resources.closing(servicer.stop_refresher)
        changes.start()
        resources.closing(changes.aclose)
        if settings.observability.service_metrics_port is not None:
            resources.background(
                _watch_queue(CurationStore(store), running.metrics), "knowledge-queue")
        resources.closing(audit_head.start_exporting(
            pool, running.metrics, settings.observability.audit_head_seconds))
        return HostedService(running, resources.pop_all().aclose)


async def _watch_queue(curation: CurationStore, metrics: ServiceMetrics) -> None:
    """Keeps the review queue's size and oldest age current for the metrics."""
    seen: dict[str, float | None] = {"size": None, "oldest": None}

    def age() -> float | None:
        if seen["size"] is None:
            return None
        oldest = seen["oldest"]
        return 0.0 if oldest is None else max(0.0, datetime.now(UTC).timestamp() - oldest)

    metrics.gauge(
        "vera_knowledge_proposals_pending", "Proposals awaiting review, every project.",
        lambda: seen["size"])
    metrics.gauge(
        "vera_knowledge_proposal_oldest_age_seconds",
        "How long the oldest proposal awaiting review has waited (0: none waits).", age)
    while True:
        try:
            size, oldest = await curation.queue()
            seen["size"] = float(size)
            seen["oldest"] = oldest.timestamp() if oldest is not None else None
        except Exception:
            log.warning("the review queue's metrics were not read", exc_info=True)
        await asyncio.sleep(QUEUE_POLL_SECONDS)
