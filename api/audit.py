"""The audit trail over REST (administrators only): each service's hash-chained records
(vera.db.audit), paged by record number and filtered by action. The console's audit page
reads it through ``read_audit`` too.

    GET /audit/{service}?after_seq=N&page_size=N&action=A    service: identity, knowledge,
                                                             snapshot; oldest first
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import Query
from pydantic import BaseModel, Field

from vera.api.auth import RestCaller
from vera.api.models import timestamp
from vera.api.routing import Caller, ResponseBody, Services, new_router
from vera.errors import Unauthorized
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2
from vera.rpc.backends import Backends
from vera.snapshot.v1 import snapshot_pb2

router = new_router("/audit", tags=["audit"])

AuditedService = Literal["identity", "knowledge", "snapshot"]
AUDITED_SERVICES: tuple[AuditedService, ...] = ("identity", "knowledge", "snapshot")
_MESSAGES = {"identity": identity_pb2, "knowledge": knowledge_service_pb2,
             "snapshot": snapshot_pb2}


class AuditQuery(BaseModel):
    after_seq: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    page_size: Annotated[int, Field(ge=0, le=500)] = 0
    action: Annotated[str, Field(max_length=64)] = ""


class AuditRecord(ResponseBody):
    seq: int
    recorded_at: datetime
    actor: str
    action: str
    targets: dict[str, str]
    hash: str


class AuditPage(ResponseBody):
    records: list[AuditRecord]
    # Where the next page starts (after_seq); None on the last page.
    next_after_seq: int | None
    # The chain's head: its record count and last hash, to keep outside the database.
    head_seq: int
    head_hash: str


async def read_audit(services: Backends, caller: RestCaller, service: AuditedService,
                     query: AuditQuery) -> AuditPage:
    """Administrators only: a page of ``service``'s audit records, oldest first."""
    if not caller.admin:
        raise Unauthorized()
    pb = _MESSAGES[service]
    stub = getattr(services, service)
    reply = await stub.ListAuditRecords(pb.ListAuditRecordsRequest(
        after_seq=query.after_seq, page_size=query.page_size, action=query.action))
    records = [AuditRecord(seq=r.seq, recorded_at=timestamp(r.recorded_at), actor=r.actor,
                           action=r.action, targets=dict(r.targets), hash=r.hash)
               for r in reply.records]
    size = query.page_size or 100
    last = records[-1].seq if len(records) == size else None
    return AuditPage(records=records, next_after_seq=last, head_seq=reply.head_seq,
                     head_hash=reply.head_hash)


@router.get("/{service}")
async def list_audit_records(service: AuditedService, query: Annotated[AuditQuery, Query()],
                             caller: Caller, services: Services) -> AuditPage:
    """Administrators only. One service's audit records, oldest first: actor, action,
    target ids and time, nothing else."""
    return await read_audit(services, caller, service, query)
