"""The gateway under test: real uvicorn on a loopback port, the real MCP client over HTTP,
and small fake gRPC servicers (one grpc.aio server) standing in for the four services."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from harness import LOCAL_TOKEN_KEY, serve_app
from mcp import Client
from mcp.shared.exceptions import MCPError

from vera.config import (
    McpSettings,
    ObservabilitySettings,
    RpcSettings,
    ServiceAddresses,
    Settings,
)
from vera.errors import (
    AmbiguousProject,
    ExpiredContextPack,
    InvalidInput,
    NotFound,
    ProjectOutOfScope,
    Unauthenticated,
)
from vera.gateway.app import build_app
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.quota import InMemoryQuotaStore
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.rpc.timestamps import to_timestamp
from vera.snapshot.v1 import snapshot_pb2, snapshot_pb2_grpc

PERSONAL = identity_pb2.Project(
    project_id="scope-personal",
    slug="me",
    display_name="Personal",
    kind=identity_pb2.PROJECT_KIND_PERSONAL,
)
SHARED = identity_pb2.Project(
    project_id="scope-acme",
    slug="acme",
    display_name="Acme",
    kind=identity_pb2.PROJECT_KIND_SHARED,
)
RECORDED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
# The one principal the fake identity knows besides the local one (bearer-token tests).
REGISTERED_PRINCIPAL = "22222222-2222-4222-8222-222222222222"


@dataclass
class Recorder:
    """What the fakes saw, and knobs a test turns to make them fail."""

    requests: dict[str, list[Any]] = field(default_factory=dict)
    boom: set[str] = field(default_factory=set)  # method names that raise RuntimeError

    def saw(self, method: str, request: Any) -> None:
        self.requests.setdefault(method, []).append(request)
        if method in self.boom:
            raise RuntimeError(f"secret internal detail from {method}")

    def last(self, method: str) -> Any:
        return self.requests[method][-1]


def make_fact(key: str, scope: str = SHARED.project_id, **extra: Any) -> knowledge_pb2.Fact:
    fact = knowledge_pb2.Fact(
        fact_key=key,
        version_id=f"{key}-v1",
        scope_id=scope,
        subject="billing-service",
        predicate="uses_database",
        object="postgres",
        state=knowledge_pb2.FACT_STATE_ACTIVE,
        trust_tier=1,
        authority=0.9,
        repository="github.com/acme/billing",
        citations=[
            knowledge_pb2.Citation(
                source_id="adr-7",
                locator="L10-20",
                title="ADR 7",
                uri="https://x/adr-7",
                excerpt="We use postgres",
                verification=knowledge_pb2.VERIFICATION_STATE_VERIFIED,
            )
        ],
        **extra,
    )
    fact.recorded_at.CopyFrom(to_timestamp(RECORDED))
    return fact


def retrieved(rank: int) -> retrieval_pb2.RetrievedFact:
    return retrieval_pb2.RetrievedFact(
        fact=make_fact(f"fact-{rank}"),
        score=1.0 / rank,
        rank=rank,
        result_ref=f"ref-{rank}",
        signals={"dense": 0.5 + rank, "lexical": 0.25 * rank},
    )


class FakeIdentity(identity_pb2_grpc.IdentityServiceServicer):
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        # Principals built-in tokens may name, API key ids revoked, principals disabled:
        # knobs a test turns (CheckCredential).
        self.known: set[str] = {REGISTERED_PRINCIPAL}
        self.revoked_keys: set[str] = set()
        self.disabled: set[str] = set()

    async def RecordRefusals(self, request, context):
        self.rec.saw("RecordRefusals", request)
        return identity_pb2.RecordRefusalsResponse()

    async def CheckCredential(self, request, context):
        self.rec.saw("CheckCredential", request)
        if request.principal_id not in self.known:
            raise InvalidInput("principal_id", reason="not_found")
        if request.principal_id in self.disabled:
            state = identity_pb2.CREDENTIAL_STATE_PRINCIPAL_DISABLED
        elif request.key_id in self.revoked_keys:
            state = identity_pb2.CREDENTIAL_STATE_KEY_REVOKED
        else:
            return identity_pb2.CheckCredentialResponse(
                state=identity_pb2.CREDENTIAL_STATE_ACTIVE,
                principal=identity_pb2.Principal(
                    principal_id=request.principal_id, personal_scope_id=PERSONAL.project_id
                ),
            )
        return identity_pb2.CheckCredentialResponse(state=state)

    async def EnsureLocalPrincipal(self, request, context):
        self.rec.saw("EnsureLocalPrincipal", request)
        return identity_pb2.EnsureLocalPrincipalResponse(
            principal=identity_pb2.Principal(
                principal_id=request.principal_id, personal_scope_id=PERSONAL.project_id
            )
        )

    async def GetPrincipal(self, request, context):
        self.rec.saw("GetPrincipal", request)
        if request.principal_id != REGISTERED_PRINCIPAL:
            raise InvalidInput("principal_id", reason="not_found")
        return identity_pb2.GetPrincipalResponse(
            principal=identity_pb2.Principal(
                principal_id=request.principal_id, personal_scope_id=PERSONAL.project_id
            )
        )

    async def EnsureExternalPrincipal(self, request, context):
        self.rec.saw("EnsureExternalPrincipal", request)
        if request.subject in self.disabled:
            raise Unauthenticated()  # as identity refuses a disabled user's external login
        # Deterministic issuer|subject mapping; the real one is tested against identity.
        mapped = uuid.uuid5(uuid.NAMESPACE_URL, f"{request.issuer}|{request.subject}")
        return identity_pb2.EnsureExternalPrincipalResponse(
            principal=identity_pb2.Principal(
                principal_id=str(mapped), personal_scope_id=PERSONAL.project_id
            )
        )

    async def ResolveScopes(self, request, context):
        self.rec.saw("ResolveScopes", request)
        return identity_pb2.ResolveScopesResponse(
            personal_scope_id=PERSONAL.project_id, projects=[PERSONAL, SHARED]
        )

    async def ResolveProject(self, request, context):
        self.rec.saw("ResolveProject", request)
        if request.project == "ambiguous":
            raise AmbiguousProject(candidates=["acme", "globex"])
        if request.project == "forbidden":
            raise ProjectOutOfScope()
        return identity_pb2.ResolveProjectResponse(project=SHARED)

    async def ResolveRepository(self, request, context):
        self.rec.saw("ResolveRepository", request)
        if request.repository == "https://github.com/acme/many":
            return identity_pb2.ResolveRepositoryResponse(
                resolution=identity_pb2.REPOSITORY_RESOLUTION_SELECTION_REQUIRED,
                canonical_repository="github.com/acme/many",
                candidates=[SHARED, PERSONAL],
            )
        if request.repository:
            return identity_pb2.ResolveRepositoryResponse(
                resolution=identity_pb2.REPOSITORY_RESOLUTION_SELECTED,
                canonical_repository="github.com/acme/billing",
                candidates=[SHARED],
            )
        return identity_pb2.ResolveRepositoryResponse(
            resolution=identity_pb2.REPOSITORY_RESOLUTION_UNMAPPED
        )


class FakeRetrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    async def AssembleContext(self, request, context):
        self.rec.saw("AssembleContext", request)
        if request.query == "nothing":
            return retrieval_pb2.AssembleContextResponse(
                empty_reason="no_matching_knowledge", assembler_version="asm-1"
            )
        return retrieval_pb2.AssembleContextResponse(
            results=[retrieved(1), retrieved(2)],
            conflicts=[
                retrieval_pb2.Conflict(
                    subject="billing-service",
                    predicate="uses_database",
                    fact_keys=["fact-1", "fact-9"],
                )
            ],
            freshness_warnings=[
                retrieval_pb2.FreshnessWarning(
                    fact_key="fact-2", source_id="adr-7", reason="source_stale"
                )
            ],
            omitted=[retrieval_pb2.Omission(fact_key="fact-3", reason="token_budget")],
            token_estimate=321,
            assembler_version="asm-1",
        )

    async def Search(self, request, context):
        self.rec.saw("Search", request)
        if request.query == "nothing":
            return retrieval_pb2.SearchResponse(
                empty_reason="no_matching_knowledge", assembler_version="asm-1"
            )
        return retrieval_pb2.SearchResponse(results=[retrieved(1)], assembler_version="asm-1")


class FakeKnowledge(knowledge_pb2_grpc.KnowledgeServiceServicer):
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.feedback: dict[tuple[str, str], str] = {}
        self.retracted: set[str] = set()

    async def ExplainFact(self, request, context):
        self.rec.saw("ExplainFact", request)
        if request.fact_key == "missing":
            raise NotFound()
        if request.fact_key == "gone":
            raise InvalidInput("fact_key", reason="not_found")
        supporting = knowledge_pb2.Assertion(
            assertion_id="a1",
            supports=True,
            trust_tier=1,
            authority=0.9,
            verification=knowledge_pb2.VERIFICATION_STATE_VERIFIED,
            source=knowledge_pb2.Source(source_id="adr-7", source_type="adr", title="ADR 7"),
            evidence=[
                knowledge_pb2.Evidence(evidence_id="e1", text="We use postgres", locator="L10")
            ],
        )
        refuting = knowledge_pb2.Assertion(
            assertion_id="a2",
            supports=False,
            trust_tier=4,
            authority=0.1,
            verification=knowledge_pb2.VERIFICATION_STATE_UNVERIFIED,
        )
        return knowledge_pb2.ExplainFactResponse(
            fact=make_fact(request.fact_key), assertions=[supporting, refuting]
        )

    async def ProposeFact(self, request, context):
        self.rec.saw("ProposeFact", request)
        return knowledge_pb2.ProposeFactResponse(
            attempt_id="att-1",
            outcome=knowledge_pb2.PROPOSAL_OUTCOME_CREATED,
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

    async def RetractProposal(self, request, context):
        self.rec.saw("RetractProposal", request)
        if request.fact_key == "missing":
            raise NotFound()
        status = (
            knowledge_pb2.RETRACTION_STATUS_ALREADY_RETRACTED
            if request.fact_key in self.retracted
            else knowledge_pb2.RETRACTION_STATUS_RETRACTED
        )
        self.retracted.add(request.fact_key)
        return knowledge_pb2.RetractProposalResponse(
            status=status,
            fact=knowledge_pb2.Fact(
                fact_key=request.fact_key, state=knowledge_pb2.FACT_STATE_RETRACTED
            ),
        )

    async def GetProposalReport(self, request, context):
        self.rec.saw("GetProposalReport", request)
        if request.page_token == "bad-cursor":
            raise InvalidInput("page_token", reason="bad_cursor")
        attempt = knowledge_pb2.ProposalAttempt(
            attempt_id="att-1",
            outcome=knowledge_pb2.PROPOSAL_OUTCOME_CREATED,
            fact_key="proposed-1",
            subject="s",
            predicate="p",
            object="o",
            fact_state=knowledge_pb2.FACT_STATE_PROPOSED,
            context=request.context,
        )
        attempt.created_at.CopyFrom(to_timestamp(RECORDED))
        return knowledge_pb2.GetProposalReportResponse(
            attempts=[attempt],
            next_page_token="page-2",
            outcome_counts={"CREATED": 1, "DEDUPLICATED": 2},
            state_counts={"PROPOSED": 1},
            total_attempts=3,
        )

    async def GetProposalPolicy(self, request, context):
        self.rec.saw("GetProposalPolicy", request)
        return knowledge_pb2.GetProposalPolicyResponse(
            allowed_predicates=["depends_on", "owned_by", "uses"],
            single_valued_predicates=["owned_by"],
            ontology_version="test-1",
        )

    async def RecordFeedback(self, request, context):
        self.rec.saw("RecordFeedback", request)
        key = (request.pack_id, request.result_ref)
        created = key not in self.feedback
        self.feedback.setdefault(key, request.signal)
        response = knowledge_pb2.RecordFeedbackResponse(
            feedback_id=f"fb-{request.result_ref}", signal=self.feedback[key], created=created
        )
        response.recorded_at.CopyFrom(to_timestamp(RECORDED))
        return response


class FakeSnapshot(snapshot_pb2_grpc.SnapshotServiceServicer):
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.packs: dict[str, snapshot_pb2.ContextPack] = {}

    async def CreateContextPack(self, request, context):
        self.rec.saw("CreateContextPack", request)
        pack = snapshot_pb2.ContextPack(
            pack_id=f"pack-{len(self.packs) + 1}",
            scope_id=request.scope_id,
            canonical_request_json=request.canonical_request_json,
            content_json=request.content_json,
            assembler_version=request.assembler_version,
        )
        pack.created_at.CopyFrom(to_timestamp(RECORDED))
        pack.expires_at.CopyFrom(to_timestamp(datetime(2025, 2, 1, tzinfo=UTC)))
        self.packs[pack.pack_id] = pack
        return snapshot_pb2.CreateContextPackResponse(pack=pack)

    async def GetContextPack(self, request, context):
        self.rec.saw("GetContextPack", request)
        pack = self.packs.get(request.pack_id)
        if pack is None:
            raise ExpiredContextPack()
        return snapshot_pb2.GetContextPackResponse(pack=pack)


@dataclass
class Fakes:
    address: str
    rec: Recorder
    knowledge: FakeKnowledge
    snapshot: FakeSnapshot
    identity: FakeIdentity


@pytest.fixture(scope="session")
async def fakes() -> AsyncIterator[Fakes]:
    rec = Recorder()
    knowledge, snapshot, identity = FakeKnowledge(rec), FakeSnapshot(rec), FakeIdentity(rec)
    running = create_server(
        [
            ServiceBinding(
                "vera.identity.v1.IdentityService",
                identity,
                identity_pb2_grpc.add_IdentityServiceServicer_to_server,
            ),
            ServiceBinding(
                "vera.knowledge.v1.KnowledgeService",
                knowledge,
                knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server,
            ),
            ServiceBinding(
                "vera.retrieval.v1.RetrievalService",
                FakeRetrieval(rec),
                retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server,
            ),
            ServiceBinding(
                "vera.snapshot.v1.SnapshotService",
                snapshot,
                snapshot_pb2_grpc.add_SnapshotServiceServicer_to_server,
            ),
        ],
        "127.0.0.1:0",
    )
    await running.server.start()
    await mark_serving(running)
    yield Fakes(f"127.0.0.1:{running.port}", rec, knowledge, snapshot, identity)
    await running.stop(0)


def gateway_settings(address: str, *, rpc: RpcSettings | None = None, **mcp: Any) -> Settings:
    return Settings(
        environment="local",
        mcp=McpSettings(local_token_key=LOCAL_TOKEN_KEY, port=0, **mcp),
        rpc=rpc or RpcSettings(),
        services=ServiceAddresses(
            identity=address, knowledge=address, retrieval=address, snapshot=address
        ),
        observability=ObservabilitySettings(mcp_metrics_host="127.0.0.1", mcp_metrics_port=0),
    )


@dataclass
class RunningGateway:
    url: str  # the MCP endpoint
    base: str
    metrics_url: str | None
    app: Any


@contextlib.asynccontextmanager
async def serve_gateway(settings: Settings, **build: Any) -> AsyncIterator[RunningGateway]:
    """Runs the gateway app under uvicorn on a loopback port (``harness.serve_app``)."""
    app = build_app(settings, **build)
    async with serve_app(app) as base:
        metrics_port = app.state.metrics_port
        yield RunningGateway(
            url=f"{base}/mcp",
            base=base,
            metrics_url=f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else None,
            app=app,
        )


@pytest.fixture(scope="session")
async def gateway(fakes: Fakes) -> AsyncIterator[RunningGateway]:
    """The gateway most tests share: quotas off so the suite's call count never matters."""
    async with serve_gateway(gateway_settings(fakes.address, quota_enabled=False)) as running:
        yield running


@pytest.fixture
def start_gateway(fakes: Fakes) -> Callable[..., Any]:
    """``async with start_gateway(clock=..., authenticator=..., **mcp_settings) as gw``;
    ``address=`` and ``rpc=`` override where and how the services are dialled."""

    def start(
        *,
        address: str | None = None,
        rpc: RpcSettings | None = None,
        clock: Callable[[], float] | None = None,
        authenticator: Any = None,
        **mcp: Any,
    ) -> contextlib.AbstractAsyncContextManager[RunningGateway]:
        settings = gateway_settings(address or fakes.address, rpc=rpc, **mcp)
        # Unit tests count quotas in process; the shared store has its own tests.
        build: dict[str, Any] = {"quota_store": InMemoryQuotaStore(clock or time.time)}
        if clock is not None:
            build["clock"] = clock
        if authenticator is not None:
            build["authenticator"] = authenticator
        return serve_gateway(settings, **build)

    return start


@pytest.fixture
def serve() -> Callable[..., contextlib.AbstractAsyncContextManager[RunningGateway]]:
    """``async with serve(settings, **build_app_kwargs) as gw`` for tests with their own
    settings (authenticated profiles, services at several addresses)."""
    return serve_gateway


@pytest.fixture
def frozen_clock() -> Callable[[], float]:
    # Mid-window, so a test never straddles a fixed-window boundary.
    return lambda: 1_700_000_010.0


CallError = Callable[..., Any]


@pytest.fixture
def call_error() -> CallError:
    """``await call_error(client, tool, args)`` -> the MCPError the call raised."""

    async def call(client: Client, tool: str, arguments: dict[str, Any]) -> MCPError:
        with pytest.raises(MCPError) as caught:
            await client.call_tool(tool, arguments)
        return caught.value

    return call
