"""Entry point of the knowledge service: migrate, pool, servicer, bound gRPC server."""

from __future__ import annotations

from vera.config import Settings
from vera.db.notify import ChannelWatch
from vera.db.pool import open_service_database, service_dsn
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.server import HostedService, ServiceBinding, create_server

from .api import KnowledgeServicer
from .domain import load_ontology
from .graph import ExtractiveSummarizer
from .store import KnowledgeStore

SERVICE_NAME = "vera.knowledge.v1.KnowledgeService"
SCHEMA = "knowledge"


async def create(settings: Settings, address: str) -> HostedService:
    """Builds the bound (not yet started) knowledge server; ``aclose`` closes the pool."""
    ontology = load_ontology(settings.knowledge.ontology_path)
    pool = await open_service_database(settings, SCHEMA, "vera.services.knowledge")
    try:
        stale_days = settings.knowledge.stale_source_days
        store = KnowledgeStore(pool, ontology, stale_source_days=stale_days)
        # The outbox trigger (migration 0008) notifies this channel; ListChanges long-polls it.
        changes = ChannelWatch(service_dsn(settings), f"{SCHEMA}.outbox")
        # Communities: derived on demand (DeriveCommunities) and by a background refresh of
        # scopes whose change log moved; an LLM summarizer would replace the extractive one.
        servicer = KnowledgeServicer(
            store,
            summarizer=ExtractiveSummarizer(),
            max_counted_rows=settings.knowledge.max_counted_rows,
            changes=changes,
            stale_source_days=stale_days,
            refresh_seconds=settings.knowledge.community_refresh_seconds,
        )
        register = knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server
        running = create_server(
            [ServiceBinding(SERVICE_NAME, servicer, register)], address, settings
        )
        servicer.start_refresher()
        changes.start()
    except BaseException:
        await pool.close()
        raise

    async def aclose() -> None:
        await changes.aclose()
        await servicer.stop_refresher()
        await pool.close()

    return HostedService(running=running, aclose=aclose)
