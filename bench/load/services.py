"""One gRPC service alone: its main RPCs with the messages the gateway sends it, over the
seeded world, through ``vera.rpc.backends`` (every call signed with the deployment's
internal key and bounded by the channel's deadline; failures arrive as ``VeraError``,
whose reason is the outcome's code).

    retrieval  AssembleContext 60 %, Search 40 %
    knowledge  BatchGetFacts 40 %, ExplainFact 20 %, GetFact 15 %, ListChanges 10 %,
               ProposeFact 10 %, GetProposalReport 5 %
    identity   ResolveProject 40 %, ResolveScopes 30 %, ChargeQuota 20 %, GetPrincipal 10 %
    snapshot   GetContextPack 50 %, CreateContextPack 30 %,
               BeginIdempotentCall + CompleteIdempotentCall 20 %
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.load.openloop import OK, Call, Operation
from bench.load.seed import SEED_TIMEOUT_S, Principal, World
from vera.gateway import views
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends
from vera.snapshot.v1 import snapshot_pb2

SERVICES = ("retrieval", "knowledge", "identity", "snapshot")
QUOTA_LIMIT = 1_000_000_000  # ChargeQuota as the gateway sends it, never refusing


def _op(
    name: str,
    weight: float,
    world: World,
    build: Callable[[random.Random, Principal], Callable[[], Awaitable[Any]]],
) -> Operation:
    def make(rng: random.Random) -> Call:
        send = build(rng, rng.choice(world.principals))

        async def call() -> str:
            await send()
            return OK

        return call

    return Operation(name, weight, make)


def retrieval_mix(b: Backends, world: World) -> list[Operation]:
    def assemble(rng: random.Random, p: Principal):
        project = rng.choice(p.projects)
        return lambda: b.retrieval.AssembleContext(
            retrieval_pb2.AssembleContextRequest(
                scope_id=project.scope_id,
                query=rng.choice(project.queries),
                limit=10,
                token_budget=2000,
            )
        )

    def search(rng: random.Random, p: Principal):
        project = rng.choice(p.projects)
        return lambda: b.retrieval.Search(
            retrieval_pb2.SearchRequest(
                scope_ids=[p.personal_scope_id, *(x.scope_id for x in p.projects)],
                query=rng.choice(project.queries),
                limit=10,
            )
        )

    return [_op("AssembleContext", 60, world, assemble), _op("Search", 40, world, search)]


def knowledge_mix(b: Backends, world: World) -> list[Operation]:
    serial = itertools.count()

    def scopes(p: Principal) -> list[str]:
        return [x.scope_id for x in p.projects]

    def batch(rng: random.Random, p: Principal):
        project = rng.choice(p.projects)
        return lambda: b.knowledge.BatchGetFacts(
            knowledge_pb2.BatchGetFactsRequest(
                scope_ids=[project.scope_id], fact_keys=project.fact_keys
            )
        )

    def explain(rng: random.Random, p: Principal):
        key = rng.choice(rng.choice(p.projects).fact_keys)
        return lambda: b.knowledge.ExplainFact(
            knowledge_pb2.ExplainFactRequest(scope_ids=scopes(p), fact_key=key)
        )

    def get(rng: random.Random, p: Principal):
        key = rng.choice(rng.choice(p.projects).fact_keys)
        return lambda: b.knowledge.GetFact(
            knowledge_pb2.GetFactRequest(scope_ids=scopes(p), fact_key=key)
        )

    def changes(rng: random.Random, p: Principal):
        return lambda: b.knowledge.ListChanges(
            knowledge_pb2.ListChangesRequest(
                after_position=0, page_size=100, scope_ids=[rng.choice(p.projects).scope_id]
            )
        )

    def session(p: Principal) -> str:
        return f"load-{world.tag}-{p.principal_id[:8]}"

    def propose(rng: random.Random, p: Principal):
        n = next(serial)
        return lambda: b.knowledge.ProposeFact(
            knowledge_pb2.ProposeFactRequest(
                principal_id=p.principal_id,
                personal_scope_id=p.personal_scope_id,
                readable_scope_ids=scopes(p),
                subject=f"load-{world.tag}-service-{n}",
                predicate="depends_on",
                object=f"load-{world.tag}-library-{n % 97}",
                context=knowledge_pb2.TaskContext(runtime="load", session_ref=session(p)),
            )
        )

    def report(rng: random.Random, p: Principal):
        return lambda: b.knowledge.GetProposalReport(
            knowledge_pb2.GetProposalReportRequest(
                principal_id=p.principal_id,
                context=knowledge_pb2.TaskContext(session_ref=session(p)),
                page_size=50,
            )
        )

    return [
        _op("BatchGetFacts", 40, world, batch),
        _op("ExplainFact", 20, world, explain),
        _op("GetFact", 15, world, get),
        _op("ListChanges", 10, world, changes),
        _op("ProposeFact (write)", 10, world, propose),
        _op("GetProposalReport", 5, world, report),
    ]


def identity_mix(b: Backends, world: World) -> list[Operation]:
    def resolve(rng: random.Random, p: Principal):
        return lambda: b.identity.ResolveProject(
            identity_pb2.ResolveProjectRequest(
                principal_id=p.principal_id, project=rng.choice(p.projects).slug
            )
        )

    def scopes(rng: random.Random, p: Principal):
        return lambda: b.identity.ResolveScopes(
            identity_pb2.ResolveScopesRequest(principal_id=p.principal_id)
        )

    def charge(rng: random.Random, p: Principal):
        window = int(time.time() // 60) * 60
        return lambda: b.identity.ChargeQuota(
            identity_pb2.ChargeQuotaRequest(
                key=f"{p.principal_id}:{rng.choice(('read', 'context'))}",
                window_start=window,
                limit=QUOTA_LIMIT,
            )
        )

    def principal(rng: random.Random, p: Principal):
        return lambda: b.identity.GetPrincipal(
            identity_pb2.GetPrincipalRequest(principal_id=p.principal_id)
        )

    return [
        _op("ResolveProject", 40, world, resolve),
        _op("ResolveScopes", 30, world, scopes),
        _op("ChargeQuota (write)", 20, world, charge),
        _op("GetPrincipal", 10, world, principal),
    ]


class SnapshotMix:
    """Packs as the gateway persists them: the content of a real AssembleContext answer."""

    def __init__(self, b: Backends, world: World) -> None:
        self._b = b
        self._world = world
        self._packs: dict[str, str] = {}
        self._content: dict[str, tuple[str, str, str, str]] = {}  # principal -> request
        self._serial = itertools.count()

    async def prepare(self) -> None:
        for p in self._world.principals:
            project = p.projects[0]
            assembled = await self._b.retrieval.AssembleContext(
                retrieval_pb2.AssembleContextRequest(
                    scope_id=project.scope_id, query=project.queries[0], limit=10, token_budget=2000
                ),
                timeout=SEED_TIMEOUT_S,
            )
            content = {
                **views.retrieval_common(assembled, compact_citations=False),
                "token_estimate": assembled.token_estimate,
                "assembler_version": assembled.assembler_version,
            }
            request = {
                "query": project.queries[0],
                "limit": 10,
                "token_budget": 2000,
                "project": {"project_id": project.scope_id, "slug": project.slug},
            }
            self._content[p.principal_id] = (
                project.scope_id,
                json.dumps(request),
                json.dumps(content),
                assembled.assembler_version,
            )
            self._packs[p.principal_id] = (await self._create(p, "")).pack.pack_id

    def _create(self, p: Principal, usage: str):
        scope, request, content, version = self._content[p.principal_id]
        return self._b.snapshot.CreateContextPack(
            snapshot_pb2.CreateContextPackRequest(
                principal_id=p.principal_id,
                scope_id=scope,
                canonical_request_json=request,
                content_json=content,
                assembler_version=version,
                usage_ref=usage,
            )
        )

    def operations(self) -> list[Operation]:
        world = self._world

        def get(rng: random.Random, p: Principal):
            return lambda: self._b.snapshot.GetContextPack(
                snapshot_pb2.GetContextPackRequest(
                    principal_id=p.principal_id, pack_id=self._packs[p.principal_id]
                )
            )

        def create(rng: random.Random, p: Principal):
            return lambda: self._create(p, f"load-{next(self._serial)}")

        def idempotent(rng: random.Random, p: Principal):
            key = f"load-{world.tag}-{next(self._serial)}"
            digest = hashlib.sha256(key.encode()).hexdigest()

            async def claim_and_record() -> None:
                await self._b.snapshot.BeginIdempotentCall(
                    snapshot_pb2.BeginIdempotentCallRequest(
                        principal_id=p.principal_id, key=key, request_hash=digest
                    )
                )
                await self._b.snapshot.CompleteIdempotentCall(
                    snapshot_pb2.CompleteIdempotentCallRequest(
                        principal_id=p.principal_id,
                        key=key,
                        request_hash=digest,
                        result_json='{"outcome": "created"}',
                    )
                )

            return claim_and_record

        return [
            _op("GetContextPack", 50, world, get),
            _op("CreateContextPack (write)", 30, world, create),
            _op("Begin+CompleteIdempotentCall (write)", 20, world, idempotent),
        ]


async def service_mix(service: str, b: Backends, world: World) -> list[Operation]:
    if service == "retrieval":
        return retrieval_mix(b, world)
    if service == "knowledge":
        return knowledge_mix(b, world)
    if service == "identity":
        return identity_mix(b, world)
    if service == "snapshot":
        mix = SnapshotMix(b, world)
        await mix.prepare()
        return mix.operations()
    raise ValueError(f"unknown service {service!r}; one of {', '.join(SERVICES)}")
