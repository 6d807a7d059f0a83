"""Entry point of the snapshot service: migrate, pool, servicer, sweeper, bound gRPC server."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from vera.config import Settings
from vera.db.audit import AuditTrail
from vera.db.pool import open_service_database
from vera.observability import audit_head
from vera.resource_stack import ResourceStack
from vera.rpc.client import open_channel
from vera.rpc.server import HostedService, ServiceBinding, create_server
from vera.services.snapshot.api import SnapshotApi
from vera.services.snapshot.domain import Clock, SnapshotService, utc_now
from vera.services.snapshot.erasure import PgPrincipalErasure
from vera.services.snapshot.fact_log import KnowledgeFactLog
from vera.services.snapshot.idempotency import IdempotencyKeys
from vera.services.snapshot.snapshots import SnapshotCatalog
from vera.services.snapshot.store import PgIdempotencyStore, PgSnapshotRecords, PgSnapshotStore
from vera.snapshot.v1 import snapshot_pb2_grpc

log = logging.getLogger(__name__)

SCHEMA = "snapshot"
SERVICE_NAME = "vera.snapshot.v1.SnapshotService"


async def run_sweeper(service: SnapshotService, interval_seconds: float) -> None:
    """Physically deletes expired packs every interval, even when nothing else is written."""
    while True:
        try:
            deleted = await service.sweep()
            if deleted:
                log.info("swept %d expired context packs", deleted)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A database blip must not end maintenance; the next tick retries.
            log.exception("context pack sweep failed")
        await asyncio.sleep(interval_seconds)


async def create(settings: Settings, address: str, *, clock: Clock = utc_now) -> HostedService:
    """Applies migrations, starts the sweeper and returns the bound (not started) server.

    ``clock`` exists for tests: it drives creation times, expiry and the sweeper.
    """
    async with ResourceStack("snapshot") as resources:
        pool = await open_service_database(settings, SCHEMA, "vera.services.snapshot")
        resources.closing(pool.close)
        # Snapshots read the authoritative facts from knowledge's change log.
        knowledge = open_channel(
            settings.services.knowledge, settings.rpc.deadline_seconds,
            auth_key=settings.rpc.auth_key, caller="snapshot")
        resources.closing(knowledge.close)
        cfg = settings.snapshot
        service = SnapshotService(
            PgSnapshotStore(
                pool,
                quota_bytes_per_scope=cfg.pack_quota_bytes_per_scope,
                quota_bytes_per_principal=cfg.pack_quota_bytes_per_principal,
            ),
            timedelta(days=cfg.pack_ttl_days),
            clock,
        )
        catalog = SnapshotCatalog(PgSnapshotRecords(pool), KnowledgeFactLog(knowledge), clock)
        keys = IdempotencyKeys(
            PgIdempotencyStore(pool),
            timedelta(hours=cfg.idempotency_ttl_hours),
            timedelta(seconds=cfg.idempotency_claim_seconds),
            clock,
        )
        running = create_server(
            [
                ServiceBinding(
                    SERVICE_NAME,
                    SnapshotApi(service, catalog, keys, PgPrincipalErasure(pool),
                                audit=AuditTrail(pool)),
                    snapshot_pb2_grpc.add_SnapshotServiceServicer_to_server,
                )
            ],
            address,
            settings,
        )
        running.metrics.pool(SCHEMA, pool)
        if cfg.sweep_interval_seconds > 0:
            resources.background(
                run_sweeper(service, cfg.sweep_interval_seconds), "snapshot-sweeper")
        resources.closing(audit_head.start_exporting(
            pool, running.metrics, settings.observability.audit_head_seconds))
        return HostedService(running, resources.pop_all().aclose)
