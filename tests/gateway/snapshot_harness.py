"""The real snapshot service (real PostgreSQL, controllable clock) behind the gateway,
with identity, knowledge and retrieval faked on one small gRPC server: what the snapshot,
pack and idempotency tests need.

The snapshot service reads knowledge's change log to freeze a scope; ``ChangeLog`` holds
that log, so a test can append later writes. Project ids are UUIDs, as identity's are.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from harness import LOCAL_TOKEN_KEY, serve_mcp

from vera.config import (
    McpSettings,
    ObservabilitySettings,
    ServiceAddresses,
    Settings,
)
from vera.db.pool import create_pool
from vera.gateway.app import build_app
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.rpc.timestamps import to_timestamp
from vera.services.snapshot import server
from vera.snapshot.v1 import snapshot_pb2_grpc

LOCAL_PRINCIPAL = "00000000-0000-4000-8000-00000000cafe"
ONTOLOGY_VERSION = "2025-01-1"
PERSONAL = identity_pb2.Project(
    project_id="3f1c9a52-0000-4000-8000-000000000001",
    slug="me",
    kind=identity_pb2.PROJECT_KIND_PERSONAL,
)
SHARED = identity_pb2.Project(
    project_id="3f1c9a52-0000-4000-8000-000000000002",
    slug="acme",
    kind=identity_pb2.PROJECT_KIND_SHARED,
)
OTHER = identity_pb2.Project(
    project_id="3f1c9a52-0000-4000-8000-000000000003",
    slug="globex",
    kind=identity_pb2.PROJECT_KIND_SHARED,
)


@dataclass
class Clock:
    current: datetime = field(default_factory=lambda: datetime(2030, 1, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


class Identity(identity_pb2_grpc.IdentityServiceServicer):
    async def EnsureLocalPrincipal(self, request, context):
        return identity_pb2.EnsureLocalPrincipalResponse(
            principal=identity_pb2.Principal(
                principal_id=request.principal_id, personal_scope_id=PERSONAL.project_id
            )
        )

    async def ResolveScopes(self, request, context):
        return identity_pb2.ResolveScopesResponse(
            personal_scope_id=PERSONAL.project_id, projects=[PERSONAL, SHARED, OTHER]
        )

    async def ResolveProject(self, request, context):
        for project in (PERSONAL, SHARED, OTHER):
            if request.project in (project.project_id, project.slug):
                return identity_pb2.ResolveProjectResponse(project=project)
        return identity_pb2.ResolveProjectResponse(project=SHARED)


class Retrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    """Answers with one result per fact key in ``keys`` and reports ``version``."""

    def __init__(self) -> None:
        self.version = "assembler-1;minilm-l6-v2;index-1"
        self.keys = ["fact-1"]
        self.requests: list[Any] = []

    def _results(self) -> list[retrieval_pb2.RetrievedFact]:
        return [
            retrieval_pb2.RetrievedFact(
                fact=knowledge_pb2.Fact(
                    fact_key=key,
                    scope_id=SHARED.project_id,
                    subject=key,
                    predicate="uses_database",
                    object="postgres",
                    state=knowledge_pb2.FACT_STATE_ACTIVE,
                ),
                score=1.0 / rank,
                rank=rank,
                result_ref=f"ref-{key}",
            )
            for rank, key in enumerate(self.keys, start=1)
        ]

    async def AssembleContext(self, request, context):
        self.requests.append(request)
        return retrieval_pb2.AssembleContextResponse(
            results=self._results(), token_estimate=10, assembler_version=self.version
        )

    async def Search(self, request, context):
        self.requests.append(request)
        return retrieval_pb2.SearchResponse(
            results=self._results(), assembler_version=self.version
        )

    async def GetIndexStatus(self, request, context):
        self.requests.append(request)
        return retrieval_pb2.GetIndexStatusResponse(assembler_version=self.version)


class ChangeLog(knowledge_pb2_grpc.KnowledgeServiceServicer):
    """Knowledge's change log, as the snapshot service pages it, plus the proposal and
    feedback calls the gateway makes (recorded, so a test sees what reached knowledge)."""

    def __init__(self) -> None:
        self.changes: list[knowledge_pb2.Change] = []
        self.proposals: list[knowledge_pb2.ProposeFactRequest] = []
        self.feedback: list[knowledge_pb2.RecordFeedbackRequest] = []
        self.fail_propose = False

    async def ProposeFact(self, request, context):
        self.proposals.append(request)
        if self.fail_propose:
            raise RuntimeError("knowledge is down")
        first = len(self.proposals) == 1
        return knowledge_pb2.ProposeFactResponse(
            attempt_id=f"att-{len(self.proposals)}",
            outcome=knowledge_pb2.PROPOSAL_OUTCOME_CREATED
            if first
            else knowledge_pb2.PROPOSAL_OUTCOME_DEDUPLICATED,
            fact=knowledge_pb2.Fact(
                fact_key="proposed-1",
                scope_id=request.personal_scope_id,
                subject=request.subject,
                predicate=request.predicate,
                object=request.object,
                state=knowledge_pb2.FACT_STATE_PROPOSED,
                trust_tier=4,
            ),
        )

    async def ListConflicts(self, request, context):
        return knowledge_pb2.ListConflictsResponse(ontology_version=ONTOLOGY_VERSION)

    async def RecordFeedback(self, request, context):
        self.feedback.append(request)
        return knowledge_pb2.RecordFeedbackResponse(
            feedback_id=f"fb-{len(self.feedback)}", signal=request.signal, created=True
        )

    def record(self, fact: knowledge_pb2.Fact) -> None:
        self.changes.append(
            knowledge_pb2.Change(
                position=len(self.changes) + 1,
                kind=knowledge_pb2.CHANGE_KIND_FACT_UPSERTED,
                fact=fact,
            )
        )

    async def ListChanges(self, request, context):
        after = [c for c in self.changes if c.position > request.after_position]
        return knowledge_pb2.ListChangesResponse(
            changes=after[: request.page_size or 100], head_position=len(self.changes)
        )

    async def BatchGetFacts(self, request, context):
        """The latest logged version of each fact, as a real retrieval service re-reads it."""
        current = {c.fact.fact_key: c.fact for c in self.changes}
        scopes = set(request.scope_ids)
        return knowledge_pb2.BatchGetFactsResponse(
            facts=[
                current[key]
                for key in request.fact_keys
                if key in current and current[key].scope_id in scopes
            ]
        )


def log_fact(
    key: str,
    scope: str,
    recorded: datetime,
    *,
    version: str = "v1",
    state: int = knowledge_pb2.FACT_STATE_ACTIVE,
    superseded: datetime | None = None,
    valid_from: datetime | None = None,
    valid_to: datetime | None = None,
    sources: tuple[tuple[str, datetime], ...] = (),
) -> knowledge_pb2.Fact:
    fact = knowledge_pb2.Fact(
        fact_key=key,
        version_id=f"{key}-{version}",
        scope_id=scope,
        subject=key,
        predicate="uses_database",
        object="postgres",
        state=state,
        citations=[
            knowledge_pb2.Citation(source_id=s, observed_at=to_timestamp(t)) for s, t in sources
        ],
    )
    for name, value in (
        ("recorded_at", recorded),
        ("superseded_at", superseded),
        ("valid_from", valid_from),
        ("valid_to", valid_to),
    ):
        if value is not None:
            getattr(fact, name).CopyFrom(to_timestamp(value))
    return fact


@dataclass
class RealSnapshot:
    address: str  # the real snapshot service
    fakes_address: str  # identity, knowledge and retrieval
    clock: Clock
    pool: asyncpg.Pool
    stub: snapshot_pb2_grpc.SnapshotServiceStub
    log: ChangeLog
    retrieval: Retrieval

    def settings(self, *, retrieval: str | None = None, **mcp: Any) -> Settings:
        """The gateway's settings; ``retrieval``: a real retrieval service's address in
        place of the fake one."""
        settings = settings_for(self.fakes_address, self.address, **mcp)
        if retrieval is None:
            return settings
        services = settings.services.model_copy(update={"retrieval": retrieval})
        return settings.model_copy(update={"services": services})


@contextlib.asynccontextmanager
async def real_snapshot(
    dsn: str, *, sweep_interval_seconds: float = 3600, **snapshot: Any
) -> AsyncIterator[RealSnapshot]:
    log, retrieval = ChangeLog(), Retrieval()
    knowledge = create_server(
        [
            ServiceBinding(
                "vera.identity.v1.IdentityService",
                Identity(),
                identity_pb2_grpc.add_IdentityServiceServicer_to_server,
            ),
            ServiceBinding(
                "vera.knowledge.v1.KnowledgeService",
                log,
                knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server,
            ),
            ServiceBinding(
                "vera.retrieval.v1.RetrievalService",
                retrieval,
                retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server,
            ),
        ],
        "127.0.0.1:0",
    )
    await knowledge.server.start()
    await mark_serving(knowledge)
    clock = Clock()
    settings = Settings(
        database={"dsn": dsn},
        services=ServiceAddresses(knowledge=f"127.0.0.1:{knowledge.port}"),
        snapshot={"sweep_interval_seconds": sweep_interval_seconds, **snapshot},
    )
    hosted = await server.create(settings, "127.0.0.1:0", clock=clock)
    await hosted.running.server.start()
    address = f"127.0.0.1:{hosted.running.port}"
    channel = open_channel(address, deadline_seconds=10)
    pool = await create_pool(dsn, server.SCHEMA, min_size=1, max_size=2)
    try:
        yield RealSnapshot(
            address,
            f"127.0.0.1:{knowledge.port}",
            clock,
            pool,
            snapshot_pb2_grpc.SnapshotServiceStub(channel),
            log,
            retrieval,
        )
    finally:
        await pool.close()
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()
        await knowledge.stop(0)


def settings_for(fakes_address: str, snapshot_address: str, **mcp: Any) -> Settings:
    mcp.setdefault("quota_enabled", False)
    return Settings(
        environment="local",
        mcp=McpSettings(local_token_key=LOCAL_TOKEN_KEY, port=0, **mcp),
        services=ServiceAddresses(
            identity=fakes_address,
            knowledge=fakes_address,
            retrieval=fakes_address,
            snapshot=snapshot_address,
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )


@contextlib.asynccontextmanager
async def serve(settings: Settings, **build: Any) -> AsyncIterator[str]:
    """The gateway under uvicorn on a loopback port; yields the MCP URL."""
    async with serve_mcp(build_app(settings, **build)) as url:
        yield url
