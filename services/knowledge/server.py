"""Entry point of the knowledge service: migrate, pool, servicer, bound gRPC server."""

from __future__ import annotations

from vera.config import ConfigError, Settings
from vera.db.migrate import migrate
from vera.db.pool import create_pool
from vera.knowledge.v1 import knowledge_pb2_grpc
from vera.rpc.server import HostedService, ServiceBinding, create_server

from .api import KnowledgeServicer
from .domain import load_ontology
from .store import KnowledgeStore

SERVICE_NAME = "vera.knowledge.v1.KnowledgeService"
SCHEMA = "knowledge"


async def create(settings: Settings, address: str) -> HostedService:
    """Builds the bound (not yet started) knowledge server; ``aclose`` closes the pool."""
    if settings.database.dsn is None:
        raise ConfigError("VERA_DATABASE__DSN: required")
    dsn = settings.database.dsn.get_secret_value()
    ontology = load_ontology()
    await migrate(dsn, SCHEMA, "vera.services.knowledge")
    pool = await create_pool(
        dsn,
        SCHEMA,
        min_size=settings.database.pool_min_size,
        max_size=settings.database.pool_max_size,
    )
    try:
        servicer = KnowledgeServicer(KnowledgeStore(pool, ontology))
        register = knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server
        running = create_server([ServiceBinding(SERVICE_NAME, servicer, register)], address)
    except BaseException:
        await pool.close()
        raise
    return HostedService(running=running, aclose=pool.close)
