"""Entry point of the identity service: migrate, pool, servicer, bound gRPC server."""

from __future__ import annotations

from vera.config import Settings
from vera.db.audit import AuditTrail
from vera.db.pool import open_service_database
from vera.identity.v1 import identity_pb2_grpc
from vera.observability import audit_head
from vera.resource_stack import ResourceStack
from vera.rpc.server import HostedService, ServiceBinding, create_server
from vera.services.identity.account_store import PgAccountStore
from vera.services.identity.accounts import AccountService
from vera.services.identity.api import IdentityApi
from vera.services.identity.domain import IdentityService
from vera.services.identity.store import PgIdentityStore

SCHEMA = "identity"
SERVICE_NAME = "vera.identity.v1.IdentityService"


async def create(settings: Settings, address: str) -> HostedService:
    """Applies migrations and returns the bound (not yet started) identity server."""
    async with ResourceStack("identity") as resources:
        pool = await open_service_database(settings, SCHEMA, "vera.services.identity")
        resources.closing(pool.close)
        store = PgIdentityStore(pool)
        accounts = PgAccountStore(pool)
        service = IdentityService(store)
        running = create_server(
            [
                ServiceBinding(
                    SERVICE_NAME,
                    IdentityApi(service, AccountService(accounts, store),
                                local_dev=settings.auth_profile == "local-dev",
                                audit=AuditTrail(pool)),
                    identity_pb2_grpc.add_IdentityServiceServicer_to_server,
                )
            ],
            address,
            settings,
        )
        running.metrics.pool(SCHEMA, pool)
        interval = settings.observability.audit_head_seconds
        resources.closing(audit_head.start_exporting(
            pool, running.metrics, interval,
            before=lambda: accounts.flush_auth_failures(interval)))
        return HostedService(running, resources.pop_all().aclose)
