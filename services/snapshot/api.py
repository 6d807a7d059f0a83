"""The SnapshotService servicer: proto <-> domain, nothing else."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2

from vera.rpc.timestamps import to_timestamp
from vera.services.snapshot.domain import ContextPack, SnapshotService
from vera.snapshot.v1 import snapshot_pb2 as pb
from vera.snapshot.v1 import snapshot_pb2_grpc


def struct_to_dict(message: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def dict_to_struct(value: dict[str, Any]) -> struct_pb2.Struct:
    return json_format.ParseDict(value, struct_pb2.Struct())


def pack_to_proto(pack: ContextPack) -> pb.ContextPack:
    return pb.ContextPack(
        pack_id=str(pack.pack_id),
        scope_id=str(pack.scope_id),
        canonical_request=dict_to_struct(pack.canonical_request),
        content=dict_to_struct(pack.content),
        assembler_version=pack.assembler_version,
        created_at=to_timestamp(pack.created_at),
        expires_at=to_timestamp(pack.expires_at),
    )


class SnapshotApi(snapshot_pb2_grpc.SnapshotServiceServicer):
    def __init__(self, service: SnapshotService) -> None:
        self._service = service

    async def CreateContextPack(self, request, context):
        pack, deduplicated = await self._service.create_context_pack(
            request.principal_id,
            request.scope_id,
            struct_to_dict(request.canonical_request),
            struct_to_dict(request.content),
            request.assembler_version,
        )
        return pb.CreateContextPackResponse(pack=pack_to_proto(pack), deduplicated=deduplicated)

    async def GetContextPack(self, request, context):
        pack = await self._service.get_context_pack(request.principal_id, request.pack_id)
        return pb.GetContextPackResponse(pack=pack_to_proto(pack))
