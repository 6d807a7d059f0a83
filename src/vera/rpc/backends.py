"""gRPC stubs for the four services, over channels whose every call has a deadline
and whose failures arrive as ``vera.errors.VeraError``."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from vera.config import Settings
from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
from vera.knowledge.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
from vera.retrieval.v1.retrieval_pb2_grpc import RetrievalServiceStub
from vera.rpc.client import open_channel
from vera.snapshot.v1.snapshot_pb2_grpc import SnapshotServiceStub


@dataclass
class Backends:
    identity: IdentityServiceStub
    knowledge: KnowledgeServiceStub
    retrieval: RetrievalServiceStub
    snapshot: SnapshotServiceStub
    channels: tuple[grpc.aio.Channel, ...]

    @classmethod
    def open(cls, settings: Settings, caller: str) -> Backends:
        """Opens one channel per service, signed as ``caller`` when the deployment has an
        internal key; call inside the event loop that will use them."""
        rpc, addresses = settings.rpc, settings.services

        def channel(address: str, deadline_seconds: float) -> grpc.aio.Channel:
            return open_channel(address, deadline_seconds, auth_key=rpc.auth_key, caller=caller)

        identity = channel(addresses.identity, rpc.deadline_seconds)
        knowledge = channel(addresses.knowledge, rpc.deadline_seconds)
        # Search and context assembly embed, search and re-read: a longer budget.
        retrieval = channel(addresses.retrieval, rpc.retrieval_deadline_seconds)
        snapshot = channel(addresses.snapshot, rpc.deadline_seconds)
        return cls(
            identity=IdentityServiceStub(identity),
            knowledge=KnowledgeServiceStub(knowledge),
            retrieval=RetrievalServiceStub(retrieval),
            snapshot=SnapshotServiceStub(snapshot),
            channels=(identity, knowledge, retrieval, snapshot),
        )

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()
