"""The SnapshotService servicer: proto <-> domain, nothing else."""

from __future__ import annotations

from vera import secret_screen
from vera.errors import Unavailable
from vera.rpc.audit import AuditPages, list_audit_records
from vera.rpc.timestamps import from_timestamp
from vera.services.snapshot.convert import KEY_STATES, json_object, pack_to_proto, snapshot_to_proto
from vera.services.snapshot.domain import PrincipalErasure, SnapshotService
from vera.services.snapshot.idempotency import IdempotencyKeys
from vera.services.snapshot.snapshots import SnapshotCatalog
from vera.snapshot.v1 import snapshot_pb2 as pb
from vera.snapshot.v1 import snapshot_pb2_grpc


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

    async def ListAuditRecords(
        self, request: pb.ListAuditRecordsRequest, context
    ) -> pb.ListAuditRecordsResponse:
        return await list_audit_records(self._audit, request, pb)

    async def CreateContextPack(
        self, request: pb.CreateContextPackRequest, context
    ) -> pb.CreateContextPackResponse:
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

    async def GetContextPack(
        self, request: pb.GetContextPackRequest, context
    ) -> pb.GetContextPackResponse:
        pack = await self._service.get_context_pack(request.principal_id, request.pack_id)
        return pb.GetContextPackResponse(pack=pack_to_proto(pack))

    async def CreateSnapshot(
        self, request: pb.CreateSnapshotRequest, context
    ) -> pb.CreateSnapshotResponse:
        snapshot = await self._catalog.create(
            request.principal_id,
            request.scope_id,
            from_timestamp(request, "as_of"),
            request.assembler_version,
            request.ontology_version,
        )
        return pb.CreateSnapshotResponse(snapshot=snapshot_to_proto(snapshot))

    async def GetSnapshot(
        self, request: pb.GetSnapshotRequest, context
    ) -> pb.GetSnapshotResponse:
        snapshot = await self._catalog.get(request.principal_id, request.snapshot_id)
        return pb.GetSnapshotResponse(snapshot=snapshot_to_proto(snapshot))

    async def BeginIdempotentCall(
        self, request: pb.BeginIdempotentCallRequest, context
    ) -> pb.BeginIdempotentCallResponse:
        begun = await self._idempotency.begin(
            request.principal_id, request.key, request.request_hash
        )
        return pb.BeginIdempotentCallResponse(
            state=KEY_STATES[begun.state], result_json=begun.result_json
        )

    async def CompleteIdempotentCall(
        self, request: pb.CompleteIdempotentCallRequest, context
    ) -> pb.CompleteIdempotentCallResponse:
        await self._idempotency.complete(
            request.principal_id, request.key, request.request_hash, request.result_json
        )
        return pb.CompleteIdempotentCallResponse()

    async def ReleaseIdempotentCall(
        self, request: pb.ReleaseIdempotentCallRequest, context
    ) -> pb.ReleaseIdempotentCallResponse:
        await self._idempotency.release(request.principal_id, request.key, request.request_hash)
        return pb.ReleaseIdempotentCallResponse()

    async def ErasePrincipalData(
        self, request: pb.ErasePrincipalDataRequest, context
    ) -> pb.ErasePrincipalDataResponse:
        if self._erasure is None:
            raise Unavailable()
        counts = await self._erasure.erase(request.principal_id)
        return pb.ErasePrincipalDataResponse(counts=counts)
