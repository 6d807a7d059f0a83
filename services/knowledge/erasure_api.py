"""The erasure RPC of KnowledgeService (ErasePrincipalData): proto <-> the erasure store,
nothing else. One RPC group of ``api.KnowledgeApi``; the REST API calls it for
administrators."""

from __future__ import annotations

from vera import request_fields
from vera.knowledge.v1 import knowledge_service_pb2 as pb

from .erasure_store import ErasureStore


class ErasureRpcs:
    _erasure: ErasureStore

    async def ErasePrincipalData(
        self, request: pb.ErasePrincipalDataRequest, context
    ) -> pb.ErasePrincipalDataResponse:
        actor = request_fields.parse_uuid("actor_principal_id", request.actor_principal_id)
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        scope = request_fields.parse_uuid("personal_scope_id", request.personal_scope_id)
        counts, event_id, position = await self._erasure.erase_principal_data(
            actor_id=actor,
            principal_id=principal,
            personal_scope_id=scope,
            related_counts=dict(request.related_counts),
        )
        return pb.ErasePrincipalDataResponse(
            counts=counts, audit_event_id=str(event_id), change_position=position
        )
