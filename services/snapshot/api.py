"""The SnapshotService servicer: proto <-> domain, nothing else."""

from __future__ import annotations

import json
from typing import Any

from vera import secret_screen
from vera.errors import InvalidInput, Unavailable
from vera.rpc.audit import AuditPages, list_audit_records
from vera.rpc.timestamps import from_timestamp, to_timestamp
from vera.services.snapshot.domain import ContextPack, PrincipalErasure, SnapshotService
from vera.services.snapshot.idempotency import IdempotencyKeys, KeyState
from vera.services.snapshot.snapshots import Snapshot, SnapshotCatalog
from vera.snapshot.v1 import snapshot_pb2 as pb
from vera.snapshot.v1 import snapshot_pb2_grpc


def json_object(text: str, field: str) -> dict[str, Any]:
    """A pack part off the wire: a JSON object, hashed and stored, never read inside."""
    try:
        value = json.loads(text)
    except ValueError:
        raise InvalidInput(field) from None
    if not isinstance(value, dict):
        raise InvalidInput(field)
    return value


def pack_to_proto(pack: ContextPack) -> pb.ContextPack:
    return pb.ContextPack(
        pack_id=str(pack.pack_id),
        scope_id=str(pack.scope_id),
        canonical_request_json=json.dumps(pack.canonical_request),
        content_json=json.dumps(pack.content),
        assembler_version=pack.assembler_version,
        created_at=to_timestamp(pack.created_at),
        expires_at=to_timestamp(pack.expires_at),
    )


_KEY_STATES = {
    KeyState.CLAIMED: pb.IDEMPOTENCY_STATE_CLAIMED,
    KeyState.COMPLETED: pb.IDEMPOTENCY_STATE_COMPLETED,
    KeyState.IN_PROGRESS: pb.IDEMPOTENCY_STATE_IN_PROGRESS,
    KeyState.MISMATCH: pb.IDEMPOTENCY_STATE_MISMATCH,
}


def snapshot_to_proto(snapshot: Snapshot) -> pb.Snapshot:
    return pb.Snapshot(
        snapshot_id=str(snapshot.snapshot_id),
        scope_id=str(snapshot.scope_id),
        as_of=to_timestamp(snapshot.as_of),
        known_as_of=to_timestamp(snapshot.known_as_of),
        fact_count=snapshot.fact_count,
        source_count=snapshot.source_count,
        newest_source_observed_at=to_timestamp(snapshot.newest_source_observed_at),
        oldest_source_observed_at=to_timestamp(snapshot.oldest_source_observed_at),
        change_position=snapshot.change_position,
        assembler_version=snapshot.assembler_version,
        ontology_version=snapshot.ontology_version,
        policy_version=snapshot.policy_version,
        embedding_version=snapshot.embedding_version,
        index_version=snapshot.index_version,
        created_at=to_timestamp(snapshot.created_at),
    )


class SnapshotApi(snapshot_pb2_grpc.SnapshotServiceServicer):
    def __init__(
        self,
        service: SnapshotService,
        catalog: SnapshotCatalog,
        idempotency: IdempotencyKeys,
        erasure: PrincipalErasure | None = None,
        audit: AuditPages | None = None,
    ) -> None:
        self._service = service
        self._catalog = catalog
        self._idempotency = idempotency
        self._erasure = erasure
        self._audit = audit

    async def ListAuditRecords(self, request, context):
        return await list_audit_records(self._audit, request, pb)

    async def CreateContextPack(self, request, context):
        canonical_request = json_object(request.canonical_request_json, "canonical_request_json")
        # A pack keeps its request's query for its whole lifetime: the query passes the
        # screen a proposal's text passes before anything is stored.
        query = canonical_request.get("query")
        await secret_screen.screen_off_loop((("query", query if isinstance(query, str) else ""),))
        pack, deduplicated = await self._service.create_context_pack(
            request.principal_id,
            request.scope_id,
            canonical_request,
            json_object(request.content_json, "content_json"),
            request.assembler_version,
            request.usage_ref,
        )
        return pb.CreateContextPackResponse(pack=pack_to_proto(pack), deduplicated=deduplicated)

    async def GetContextPack(self, request, context):
        pack = await self._service.get_context_pack(request.principal_id, request.pack_id)
        return pb.GetContextPackResponse(pack=pack_to_proto(pack))

    async def CreateSnapshot(self, request, context):
        snapshot = await self._catalog.create(
            request.principal_id,
            request.scope_id,
            from_timestamp(request, "as_of"),
            request.assembler_version,
            request.ontology_version,
        )
        return pb.CreateSnapshotResponse(snapshot=snapshot_to_proto(snapshot))

    async def GetSnapshot(self, request, context):
        snapshot = await self._catalog.get(request.principal_id, request.snapshot_id)
        return pb.GetSnapshotResponse(snapshot=snapshot_to_proto(snapshot))

    async def BeginIdempotentCall(self, request, context):
        begun = await self._idempotency.begin(
            request.principal_id, request.key, request.request_hash
        )
        return pb.BeginIdempotentCallResponse(
            state=_KEY_STATES[begun.state], result_json=begun.result_json
        )

    async def CompleteIdempotentCall(self, request, context):
        await self._idempotency.complete(
            request.principal_id, request.key, request.request_hash, request.result_json
        )
        return pb.CompleteIdempotentCallResponse()

    async def ReleaseIdempotentCall(self, request, context):
        await self._idempotency.release(request.principal_id, request.key, request.request_hash)
        return pb.ReleaseIdempotentCallResponse()

    async def ErasePrincipalData(self, request, context):
        if self._erasure is None:
            raise Unavailable()
        counts = await self._erasure.erase(request.principal_id)
        return pb.ErasePrincipalDataResponse(counts=counts)
