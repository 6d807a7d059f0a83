"""What the load reads: principals (identity users, each with a built-in MCP token),
their shared projects, and a generated coding-organization corpus per project (the scale
bench's generator, loaded through ``vera ingest``'s parser and IngestKnowledge), indexed
before the first timed call. Every name carries the run's tag, so a stack that already
holds earlier runs is loaded again without collisions.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.scale_corpus import generate, write_files
from vera.api.identity import mcp_scope_names, mint_mcp_token
from vera.config import Settings
from vera.identity.v1 import identity_pb2
from vera.ingest_records import FACTS_PER_CALL, parse_jsonl
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends

INDEX_TIMEOUT_S = 600.0
SEED_TIMEOUT_S = 120.0  # per seeding RPC: a load on a busy 2-core box is slow


@dataclass
class Project:
    slug: str
    scope_id: str
    queries: list[str]
    fact_keys: list[str] = field(default_factory=list)


@dataclass
class Principal:
    principal_id: str
    token: str | None  # None: the target has no built-in token issuer (seeded over gRPC only)
    personal_scope_id: str
    projects: list[Project]


@dataclass
class World:
    tag: str
    principals: list[Principal]
    facts: int
    seed_s: float

    def describe(self) -> dict:
        projects = [p for principal in self.principals for p in principal.projects]
        return {
            "tag": self.tag,
            "principals": len(self.principals),
            "projects": len(projects),
            "facts": self.facts,
            "seed_s": round(self.seed_s, 1),
        }


def new_tag() -> str:
    return secrets.token_hex(3)


def can_mint_tokens(settings: Settings) -> bool:
    mcp = settings.mcp
    return mcp.jwt_secret is not None and bool(mcp.auth_issuer) and bool(mcp.auth_audience)


async def _ingest_project(
    backends: Backends,
    principal_id: str,
    scope_id: str,
    facts: int,
    corpus_seed: int,
    workdir: Path,
) -> tuple[int, list[str]]:
    """Loads one generated corpus; returns (change position, its questions)."""
    corpus = generate(
        facts, seed=corpus_seed, facts_per_file=facts, questions=max(5, min(50, facts // 2))
    )
    directory = workdir / f"corpus-{corpus_seed}"
    directory.mkdir()
    position = 0
    for path in write_files(corpus, directory):
        parsed = parse_jsonl(path)
        for i in range(0, max(len(parsed.facts), 1), FACTS_PER_CALL):
            response = await backends.knowledge.IngestKnowledge(
                knowledge_pb2.IngestKnowledgeRequest(
                    principal_id=principal_id,
                    scope_id=scope_id,
                    facts=parsed.facts[i : i + FACTS_PER_CALL],
                    sources=parsed.sources if i == 0 else [],
                    entities=parsed.entities if i == 0 else [],
                ),
                timeout=SEED_TIMEOUT_S,
            )
            position = max(position, response.change_position)
    return position, [q.text for q in corpus.questions]


async def wait_indexed(backends: Backends, position: int) -> None:
    give_up = time.monotonic() + INDEX_TIMEOUT_S
    while True:
        status = await backends.retrieval.GetIndexStatus(
            retrieval_pb2.GetIndexStatusRequest(), timeout=SEED_TIMEOUT_S
        )
        if status.indexed_position >= position:
            return
        if time.monotonic() > give_up:
            raise TimeoutError("the retrieval index did not catch up with the load's corpus")
        await asyncio.sleep(0.2)


async def seed(
    backends: Backends,
    settings: Settings,
    *,
    principals: int,
    projects_per_principal: int,
    facts_per_project: int,
    tag: str | None = None,
) -> World:
    t0 = time.perf_counter()
    tag = tag or new_tag()
    mint = can_mint_tokens(settings)
    scopes = mcp_scope_names(settings)
    out: list[Principal] = []
    position = 0
    with tempfile.TemporaryDirectory(prefix="vera-load-") as tmp:
        workdir = Path(tmp)
        for i in range(principals):
            user = await backends.identity.CreateUser(
                identity_pb2.CreateUserRequest(display_name=f"load {tag} agent {i}"),
                timeout=SEED_TIMEOUT_S,
            )
            pid = user.principal.principal_id
            mine: list[Project] = []
            for j in range(projects_per_principal):
                slug = f"load-{tag}-{i}-{j}"
                created = await backends.identity.EnsureProject(
                    identity_pb2.EnsureProjectRequest(principal_id=pid, slug=slug),
                    timeout=SEED_TIMEOUT_S,
                )
                scope = created.project.project_id
                at, queries = await _ingest_project(
                    backends,
                    pid,
                    scope,
                    facts_per_project,
                    corpus_seed=i * projects_per_principal + j + 1,
                    workdir=workdir,
                )
                position = max(position, at)
                mine.append(Project(slug, scope, queries))
            scopes_of = await backends.identity.ResolveScopes(
                identity_pb2.ResolveScopesRequest(principal_id=pid), timeout=SEED_TIMEOUT_S
            )
            token = None
            if mint:
                key = await backends.identity.CreateApiKey(
                    identity_pb2.CreateApiKeyRequest(principal_id=pid, label="load"),
                    timeout=SEED_TIMEOUT_S,
                )
                token = mint_mcp_token(settings, pid, scopes, key_id=key.key.key_id).token
            out.append(Principal(pid, token, scopes_of.personal_scope_id, mine))
    await wait_indexed(backends, position)
    for principal in out:
        for project in principal.projects:
            found = await backends.retrieval.Search(
                retrieval_pb2.SearchRequest(
                    scope_ids=[project.scope_id], query=project.queries[0], limit=10
                ),
                timeout=SEED_TIMEOUT_S,
            )
            project.fact_keys = [r.fact.fact_key for r in found.results]
            if not project.fact_keys:
                raise RuntimeError(f"the seeded project {project.slug} answers no search")
    return World(
        tag, out, principals * projects_per_principal * facts_per_project, time.perf_counter() - t0
    )
