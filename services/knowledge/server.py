"""Entry point of the knowledge service: migrate, pool, servicer, bound gRPC server."""

from __future__ import annotations

from vera.config import Settings
from vera.db.pool import open_service_database
from vera.knowledge.v1 import knowledge_pb2_grpc
from vera.rpc.server import HostedService, ServiceBinding, create_server

from .api import KnowledgeServicer
from .domain import load_ontology
from .store import KnowledgeStore

SERVICE_NAME = "vera.knowledge.v1.KnowledgeService"
SCHEMA = "knowledge"


async def create(settings: Settings, address: str) -> HostedService:
    """Builds the bound (not yet started) knowledge server; ``aclose`` closes the pool."""
    ontology = load_ontology()
    pool = await open_service_database(settings, SCHEMA, "vera.services.knowledge")
    try:
        servicer = KnowledgeServicer(KnowledgeStore(pool, ontology))
        register = knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server
        running = create_server([ServiceBinding(SERVICE_NAME, servicer, register)], address)
    except BaseException:
        await pool.close()
        raise
    return HostedService(running=running, aclose=pool.close)
