"""Entry point of the identity service: migrate, pool, servicer, bound gRPC server."""

from __future__ import annotations

from vera.config import Settings
from vera.db.pool import open_service_database
from vera.identity.v1 import identity_pb2_grpc
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
    pool = await open_service_database(settings, SCHEMA, "vera.services.identity")
    try:
        store = PgIdentityStore(pool)
        service = IdentityService(store)
        running = create_server(
            [
                ServiceBinding(
                    SERVICE_NAME,
                    IdentityApi(service, AccountService(PgAccountStore(pool), store),
                                local_dev=settings.auth_profile == "local-dev"),
                    identity_pb2_grpc.add_IdentityServiceServicer_to_server,
                )
            ],
            address,
            settings,
        )
        running.metrics.pool(SCHEMA, pool)
    except BaseException:
        await pool.close()
        raise

    async def aclose() -> None:
        await pool.close()

    return HostedService(running, aclose)
