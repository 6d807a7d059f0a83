"""The latency and scale bench on a generated corpus: ``scripts/bench scale``.

    scripts/bench scale [--scale-sizes 10000,100000] [--scale-100k] [--scale-out PATH]
                            [--scale-keep DIR]

For each size it generates a deterministic, varied coding-organization corpus (services,
teams, libraries, ADRs, runbooks, repositories, code paths; several facts per source so
every fact has neighbours), starts a stack with ``vera up`` in a temporary data dir, and:

- loads it through ``vera ingest``'s own loader (``vera.ingest_records``: parse_jsonl, then the
  IngestKnowledge calls, 10k-fact files into one project) and times the load and the tail
  from the end of the load until GetIndexStatus reports everything indexed;
- asks questions generated from held facts (``knowledge_get_context``, limit 10) four
  ways, interleaved per question so the box's load hits all alike: the official MCP
  client; the same JSON-RPC POST with httpx (the MCP HTTP interface without the Python
  client's own per-call work); the same retrieval pipeline in process over the same
  indexes (the documents table the service reloads from, and a copy of its qdrant-edge
  shard), without the gateway and gRPC hops; one query embedding alone (the floor).
  p50/p95 of each, and hit@10 as a sanity check;
- times the service's embedder alone over 1024 of the facts (texts/s): the compute floor
  of the end-to-end indexing rate;
- measures index freshness: a one-fact IngestKnowledge returns, then ``knowledge_search``
  is polled (20 ms) until the fact is found;
- reads the peak RSS (VmHWM) of every process under ``vera up``.

Prints a table and writes ``bench-results/scale.json`` with the machine it ran on.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import dsn_of_stack, machine_info, render_table, running_stack

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench-results" / "scale.json"
FACTS_PER_FILE = 10_000
LIMIT = 10
TOKEN_BUDGET = 32000
SEED = 5
FRESHNESS_PROBES = 20
FRESHNESS_POLL_S = 0.02
FRESHNESS_GIVE_UP_S = 10.0
INDEX_TIMEOUT_S = 3600.0
FLOOR_TEXTS = 1024  # the embedder alone, bulk indexing's floor
FLOOR_ROUNDS = 3
LOADED_MARKER = "loaded.json"  # in a --scale-keep directory: what it holds

# --- the corpus --------------------------------------------------------------------------

_PREFIXES = ("ledger", "billing", "payments", "checkout", "catalog", "search", "identity",
             "auth", "session", "inventory", "shipping", "pricing", "notify", "email", "sms",
             "profile", "risk", "fraud", "audit", "report", "export", "import", "media",
             "image", "video", "feed", "ranking", "recommend", "ads", "tracking", "metrics",
             "alerting", "scheduler", "workflow", "orders", "cart", "tax", "refund",
             "loyalty", "coupon", "geo", "routing", "dispatch", "chat", "support", "docs",
             "config", "flags", "gateway", "edge")
_SUFFIXES = ("api", "service", "worker", "gateway", "indexer", "sync", "store", "proxy",
             "scheduler", "consumer", "publisher", "cache", "batch", "stream", "engine",
             "ui", "bff", "daemon", "cron", "adapter")
_TEAMS = ("Team Atlas", "Team Borealis", "Team Cobalt", "Team Dune", "Team Ember",
          "Team Fjord", "Team Granite", "Team Harbor", "Team Indigo", "Team Juniper",
          "Team Kestrel", "Team Lumen", "Team Meridian", "Team Nimbus", "Team Onyx",
          "Team Pioneer", "Team Quartz", "Team Rook", "Team Sierra", "Team Tundra",
          "Team Umber", "Team Vega", "Team Willow", "Team Xenon", "Team Yarrow", "Team Zephyr")
_LANGUAGES = ("Python 3.11", "Python 3.12", "Go 1.22", "Go 1.21", "Kotlin 1.9", "Java 21",
              "TypeScript 5.4", "Rust 1.78", "Scala 3.3", "Elixir 1.16")
_LIBRARIES = ("FastAPI", "Django", "SQLAlchemy", "asyncpg", "pydantic", "gRPC", "protobuf",
              "Kafka client", "Celery", "Redis client", "httpx", "Spring Boot", "Ktor",
              "Gin", "Echo", "tokio", "axum", "serde", "React", "Next.js", "OpenTelemetry",
              "Prometheus client", "boto3", "Hibernate", "jOOQ", "Flyway", "Alembic",
              "structlog", "zap", "tracing")
_DATASTORES = ("PostgreSQL 15", "PostgreSQL 16", "MySQL 8", "Redis", "Cassandra",
               "DynamoDB", "Elasticsearch", "ClickHouse", "MongoDB", "S3", "BigQuery",
               "CockroachDB")
_QUEUES = ("Kafka", "RabbitMQ", "SQS", "Pub/Sub", "NATS", "Kinesis")
_REGIONS = ("eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1",
            "ap-northeast-1")
_CLUSTERS = ("prod-blue", "prod-green", "prod-core", "prod-edge", "prod-batch")
_PROTOCOLS = ("gRPC", "REST over HTTP/2", "GraphQL", "async events on Kafka")
_FORGES = ("github.com", "gitlab.com")
_ORGS = ("acme", "acme-platform", "acme-data", "acme-retail")
_MODULES = ("handlers", "models", "client", "retry", "config", "schema", "jobs", "auth",
            "cache", "metrics", "routes", "migrations", "validators", "serializers")
_REASONS = ("to cut p99 latency", "to remove a single point of failure",
            "because the vendor contract ends", "to simplify on-call",
            "to meet the data residency rules", "to reduce cloud cost",
            "because the old client leaked connections", "to unify observability")
_FEATURES = ("request validation", "idempotent retries", "token refresh", "pagination",
             "rate limiting", "cache invalidation", "schema migration", "event fan-out")
_DOC_KINDS = ("adr", "runbook", "design", "readme", "postmortem", "ownership")


@dataclass(frozen=True)
class Question:
    text: str
    source_id: str
    locator: str


@dataclass
class Corpus:
    files: list[list[dict]] = field(default_factory=list)  # `vera ingest` lines per file
    questions: list[Question] = field(default_factory=list)

    @property
    def facts(self) -> int:
        return sum(1 for records in self.files for r in records if r["type"] == "fact")


def _service_name(n: int) -> str:
    base = f"{_PREFIXES[n % len(_PREFIXES)]}-{_SUFFIXES[(n // len(_PREFIXES)) % len(_SUFFIXES)]}"
    generation = n // (len(_PREFIXES) * len(_SUFFIXES))
    return base if generation == 0 else f"{base}-{generation + 1}"


def _facts_about(rng: random.Random, svc: str, other: str, kind: str, number: int,
                 repo: str) -> list[tuple[str, str, str, str, str]]:
    """(subject, predicate, object, question, code path) candidates for one source."""
    pkg = svc.replace("-", "_")
    module = rng.choice(_MODULES)
    path = f"services/{pkg}/{module}.py"
    lib, lib2 = rng.sample(_LIBRARIES, 2)
    store, queue = rng.choice(_DATASTORES), rng.choice(_QUEUES)
    team = rng.choice(_TEAMS)
    region, cluster = rng.choice(_REGIONS), rng.choice(_CLUSTERS)
    timeout = rng.choice((150, 250, 400, 800, 1200, 2000, 3000, 5000))
    retries = rng.randint(1, 6)
    slo = rng.choice((99.0, 99.5, 99.9, 99.95, 99.99))
    p99 = rng.choice((50, 80, 120, 200, 300, 500, 750))
    port = rng.randint(7000, 9900)
    reason = rng.choice(_REASONS)
    ticket = f"{pkg.split('_')[0].upper()}-{rng.randint(100, 9999)}"
    candidates = [
        (svc, "is owned by", f"{team}; escalate through the {team.split()[1].lower()} "
         "on-call rotation", f"Which team owns {svc}?", ""),
        (svc, "is written in", rng.choice(_LANGUAGES) + f" and built with {lib}",
         f"What language and framework is {svc} written in?", ""),
        (svc, "stores its data in", f"{store} (database {pkg}_db, migrations managed by "
         f"{rng.choice(('Alembic', 'Flyway', 'Liquibase', 'golang-migrate'))})",
         f"Which database does {svc} use for its data?", ""),
        (svc, "calls", f"{other} over {rng.choice(_PROTOCOLS)} with a {timeout} ms timeout "
         f"and {retries} retries", f"How does {svc} call {other}, and with what timeout?", path),
        (svc, "publishes events to", f"{queue} topic {pkg}.events.v{rng.randint(1, 4)}",
         f"Where does {svc} publish its events?", ""),
        (svc, "is deployed to", f"the {cluster} cluster in {region}, {rng.randint(2, 24)} "
         f"replicas, port {port}", f"Where is {svc} deployed and how many replicas run?", ""),
        (svc, "has the SLO", f"{slo}% availability and p99 latency under {p99} ms",
         f"What is the SLO of {svc}?", ""),
        (f"{svc} ADR-{number:04d}", "decided", f"to replace {lib2} with {lib} in {svc} "
         f"{reason}", f"Why did {svc} replace {lib2} with {lib}?", ""),
        (path, "implements", f"the {module} layer of {svc}: {rng.choice(_FEATURES)}",
         f"Which file in {svc} implements its {module} layer?", path),
        (svc, "pins", f"{lib} {rng.randint(1, 5)}.{rng.randint(0, 30)}.{rng.randint(0, 9)} "
         f"because of {ticket}", f"Which version of {lib} does {svc} pin, and why?", ""),
        (svc, "must not", f"call {store} directly from request handlers; go through "
         f"{pkg}.repository", f"What must {svc} not do with {store}?", path),
        (f"{svc} runbook", "says", f"when {svc} alerts on queue lag, scale the consumer to "
         f"{rng.randint(4, 32)} workers and page {team}", f"What does the {svc} runbook say "
         "to do on queue lag?", ""),
        (svc, "lives in", f"the repository {repo} under services/{pkg}",
         f"Which repository holds the code of {svc}?", ""),
    ]
    rng.shuffle(candidates)
    return candidates


def generate(n_facts: int, seed: int = SEED, *, facts_per_file: int = FACTS_PER_FILE,
             questions: int = 200) -> Corpus:
    """A deterministic corpus of exactly ``n_facts`` facts in `vera ingest` JSONL records,
    split into files of ``facts_per_file`` facts (each file defines the sources its facts
    cite), and ``questions`` questions each answered by one held fact."""
    rng = random.Random(seed)
    corpus = Corpus()
    records: list[dict] = []
    facts_in_file = 0
    held: list[Question] = []
    number = 0
    produced = 0
    base = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
    while produced < n_facts:
        svc = _service_name(number)
        other = _service_name(rng.randrange(max(number, 1) + 50))
        kind = _DOC_KINDS[number % len(_DOC_KINDS)]
        org = rng.choice(_ORGS)
        repo = f"https://{rng.choice(_FORGES)}/{org}/{svc.split('-')[0]}-platform"
        observed = base + dt.timedelta(days=rng.randrange(900), minutes=rng.randrange(1440))
        source_id = f"{kind}/{svc}/{number:06d}"
        want = min(rng.randint(4, 9), n_facts - produced, facts_per_file - facts_in_file)
        records.append({"type": "source", "id": source_id, "source_type": kind,
                        "title": f"{kind.upper()} {number:04d}: {svc}",
                        "uri": f"{repo}/blob/main/docs/{kind}/{number:04d}.md",
                        "observed_at": observed.isoformat().replace("+00:00", "Z")})
        for index, (subject, predicate, obj, question, path) in enumerate(
                _facts_about(rng, svc, other, kind, number, repo)[:want]):
            locator = f"§{index + 1}"
            fact = {"type": "fact", "subject": subject, "predicate": predicate, "object": obj,
                    "source": source_id, "locator": locator,
                    "valid_from": observed.isoformat().replace("+00:00", "Z"),
                    "document_type": kind, "trust_tier": rng.randint(1, 3),
                    "authority": round(rng.uniform(0.4, 1.0), 2)}
            if path:
                fact["repository"] = repo
                fact["code_path"] = path
            records.append(fact)
            held.append(Question(question, source_id, locator))
        produced += want
        facts_in_file += want
        number += 1
        if facts_in_file >= facts_per_file or produced >= n_facts:
            corpus.files.append(records)
            records, facts_in_file = [], 0
    pick = random.Random(seed + 1)
    corpus.questions = pick.sample(held, min(questions, len(held)))
    return corpus


def write_files(corpus: Corpus, directory: Path) -> list[Path]:
    paths = []
    for n, records in enumerate(corpus.files):
        path = directory / f"scale-{n:03d}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        paths.append(path)
    return paths


# --- measurements ------------------------------------------------------------------------


def _pct(values: list[float]) -> dict[str, float | int]:
    from bench.metrics import percentile

    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "n": len(values)}


def _settings(data_dir: Path):
    from vera.commands import settings_at
    from vera.stack.run_files import read_stack_file, stack_client_settings

    settings = stack_client_settings(settings_at(data_dir), data_dir)
    return settings, read_stack_file(data_dir.resolve())


async def load_corpus(paths: list[Path], data_dir: Path, project: str) -> dict:
    """`vera ingest`'s loader (parse, then IngestKnowledge calls) over every file without
    waiting in between, then GetIndexStatus until all is indexed."""
    from vera.identity.v1 import identity_pb2
    from vera.ingest_records import FACTS_PER_CALL, parse_jsonl
    from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
    from vera.retrieval.v1 import retrieval_pb2
    from vera.rpc.backends import Backends

    settings, _ = _settings(data_dir)
    parsed_files = [parse_jsonl(p) for p in paths]
    facts = sum(len(p.facts) for p in parsed_files)
    principal = str(settings.mcp.local_principal_id)
    backends = Backends.open(settings, caller="cli")
    try:
        await backends.identity.EnsureLocalPrincipal(
            identity_pb2.EnsureLocalPrincipalRequest(principal_id=principal))
        created = await backends.identity.EnsureProject(
            identity_pb2.EnsureProjectRequest(principal_id=principal, slug=project))
        scope = created.project.project_id
        repositories = sorted(set().union(*(p.repositories for p in parsed_files)))
        for repository in repositories:
            await backends.identity.MapRepository(identity_pb2.MapRepositoryRequest(
                principal_id=principal, project_id=scope, repository=repository))
        start_status = await backends.retrieval.GetIndexStatus(
            retrieval_pb2.GetIndexStatusRequest(), timeout=120)
        t0 = time.perf_counter()
        position = 0
        for parsed in parsed_files:
            for i in range(0, max(len(parsed.facts), 1), FACTS_PER_CALL):
                response = await backends.knowledge.IngestKnowledge(
                    knowledge_pb2.IngestKnowledgeRequest(
                        principal_id=principal, scope_id=scope,
                        facts=parsed.facts[i:i + FACTS_PER_CALL],
                        sources=parsed.sources if i == 0 else [],
                        entities=parsed.entities if i == 0 else []), timeout=600)
                position = max(position, response.change_position)
        load_s = time.perf_counter() - t0
        status = await backends.retrieval.GetIndexStatus(
            retrieval_pb2.GetIndexStatusRequest(), timeout=120)
        at_load_end = status.indexed_position
        while status.indexed_position < position:
            if time.perf_counter() - t0 > INDEX_TIMEOUT_S:
                raise TimeoutError("indexing did not catch up")
            await asyncio.sleep(0.1)
            status = await backends.retrieval.GetIndexStatus(
                retrieval_pb2.GetIndexStatusRequest(), timeout=120)
        total_s = time.perf_counter() - t0
    finally:
        await backends.close()
    span = max(position - start_status.indexed_position, 1)
    behind = position - at_load_end
    return {
        "facts": facts, "files": len(paths), "load_s": load_s,
        "load_facts_per_s": facts / load_s,
        "index_tail_s": total_s - load_s,
        "indexed_share_at_load_end": round(1 - behind / span, 4),
        "index_tail_facts_per_s": (behind / span * facts) / (total_s - load_s)
        if total_s > load_s else None,
        "all_indexed_s": total_s,
        "end_to_end_facts_per_s": facts / total_s,
        "scope_id": scope,
    }


def hnsw_on_disk(data_dir: Path) -> dict:
    """Segments of the embedded shard, and how many carry an HNSW ``vector_index``."""
    segments = data_dir / "vectors" / "segments"
    dirs = [d for d in segments.iterdir() if d.is_dir()] if segments.is_dir() else []
    with_index = [d for d in dirs if (d / "vector_index").is_dir()]
    return {"segments": len(dirs), "hnsw_segments": len(with_index)}


async def wait_for_hnsw(data_dir: Path, give_up_s: float) -> dict:
    """Waits (bounded) for a segment with an HNSW index and no build in flight."""
    from vera.services.retrieval.vectors.edge import OPTIMIZE_IDLE_SECONDS

    t0 = time.perf_counter()
    state = hnsw_on_disk(data_dir)
    stable_since = None
    last = None
    while time.perf_counter() - t0 < give_up_s:
        state = hnsw_on_disk(data_dir)
        building = (data_dir / "vectors.building").exists()  # a child builds a copy
        if state["hnsw_segments"] and state == last and not building:
            stable_since = stable_since or time.perf_counter()
            # Longer than the pause after which the index starts a build of its own.
            if time.perf_counter() - stable_since > OPTIMIZE_IDLE_SECONDS + 3:
                break
        else:
            stable_since = None
        last = state
        await asyncio.sleep(0.5)
    return {**state, "waited_s": time.perf_counter() - t0}


def _hit(payload: dict | None, question: Question) -> bool:
    for result in ((payload or {}).get("results") or [])[:LIMIT]:
        for c in result.get("citations") or []:
            if c.get("source_id") == question.source_id and c.get("locator") == question.locator:
                return True
    return False


async def ask(stack: LaunchedStack, project: str, scope: str, questions: list[Question],
              pipeline: InProcessPipeline) -> dict:
    """Each question four ways, one after the other so the box's load hits all alike:
    ``knowledge_get_context`` through the official client; the same JSON-RPC POST with
    httpx (the MCP HTTP interface without the client's own per-call work: its models and
    its validation of structuredContent against the output schema); the service's
    pipeline in process (``assemble``, no gateway, no gRPC); one query embedding alone."""
    import httpx

    from bench.gateway_overhead import MODERN, request_body, request_headers
    from vera.services.retrieval.domain import Filters

    tool = "knowledge_get_context"
    ms: dict[str, list[float]] = {"mcp": [], "http": [], "in_process": [], "embed": []}
    hits = {"mcp": 0, "http": 0, "in_process": 0}
    errors = 0
    async with stack.mcp_client() as client, httpx.AsyncClient(timeout=60) as http:
        for index, q in enumerate([*questions[:3], *questions]):  # three warm-up rounds
            args = {"query": q.text, "project": project, "limit": LIMIT,
                    "token_budget": TOKEN_BUDGET}
            t0 = time.perf_counter()
            result = await client.call_tool(tool, args)
            t1 = time.perf_counter()
            response = await http.post(stack.mcp_url, json=request_body(tool, MODERN, args),
                                       headers=request_headers(tool, MODERN, stack.mcp_token()))
            t2 = time.perf_counter()
            outcome = await pipeline.retriever.assemble(scope, q.text, LIMIT, TOKEN_BUDGET,
                                                        Filters(), compact=False)
            t3 = time.perf_counter()
            await pipeline.embedder.embed([q.text])
            t4 = time.perf_counter()
            if index < 3:
                continue
            for name, took in (("mcp", t1 - t0), ("http", t2 - t1), ("in_process", t3 - t2),
                               ("embed", t4 - t3)):
                ms[name].append(took * 1000)
            answer = response.json().get("result", {}) if response.status_code == 200 else {}
            if result.is_error or not answer or answer.get("isError"):
                errors += 1
                continue
            hits["mcp"] += _hit(result.structured_content, q)
            hits["http"] += _hit(answer.get("structuredContent"), q)
            hits["in_process"] += any(
                c.source_id == q.source_id and c.locator == q.locator
                for r in outcome.results[:LIMIT] for c in r.fact.citations)
    return {**{f"{name}_ms": _pct(values) for name, values in ms.items()},
            **{f"{name}_hit@10": count / len(questions) for name, count in hits.items()},
            "errors": errors}


async def freshness(stack: LaunchedStack, data_dir: Path, project: str, scope: str,
                    probes: int) -> dict:
    """One-fact IngestKnowledge returns -> polled knowledge_search finds it."""

    from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
    from vera.rpc.backends import Backends

    settings, _ = _settings(data_dir)
    principal = str(settings.mcp.local_principal_id)
    backends = Backends.open(settings, caller="cli")
    seconds, missed = [], 0
    run_nonce = random.SystemRandom().randrange(10**6)
    try:
        async with stack.mcp_client() as client:
            for n in range(probes):
                # Unique per run: a --scale-keep directory still holds earlier probes.
                token = f"zq{n:02d}fresh{run_nonce:06d}"
                source = f"freshness/{token}"
                await backends.knowledge.IngestKnowledge(knowledge_pb2.IngestKnowledgeRequest(
                    principal_id=principal, scope_id=scope,
                    sources=[knowledge_pb2.SourceInput(source_id=source, source_type="adr",
                                                       title=f"freshness probe {n}")],
                    facts=[knowledge_pb2.FactInput(
                        subject=f"probe-service-{token}", predicate="is owned by",
                        object=f"Team Freshness {token}", source_id=source, locator="§1")]),
                    timeout=60)
                t0 = time.perf_counter()
                found = False
                while time.perf_counter() - t0 < FRESHNESS_GIVE_UP_S:
                    result = await client.call_tool("knowledge_search", {
                        "query": f"probe-service-{token} owner", "project": project,
                        "limit": 3})
                    results = (result.structured_content or {}).get("results") or []
                    if any(any(c.get("source_id") == source for c in r.get("citations") or [])
                           for r in results):
                        found = True
                        break
                    await asyncio.sleep(FRESHNESS_POLL_S)
                if found:
                    seconds.append(time.perf_counter() - t0)
                else:
                    missed += 1
    finally:
        await backends.close()
    return {"s": _pct(seconds), "missed": missed, "poll_s": FRESHNESS_POLL_S,
            "probes": probes}


@dataclass
class InProcessPipeline:
    retriever: Any
    embedder: Any
    setup: dict
    facts: dict  # fact_key -> Fact, every fact the stack holds


@contextlib.asynccontextmanager
async def in_process_pipeline(data_dir: Path, stack_pid: int,
                              tmp: Path) -> AsyncIterator[InProcessPipeline]:
    """The service's Retriever over the same documents (reloaded from PostgreSQL, as the
    service does on start) and a copy of its qdrant-edge shard; no gateway, no gRPC."""
    from bench.ablation import DictFacts
    from vera.db.pool import create_pool
    from vera.services.retrieval.documents.index import DocumentIndex
    from vera.services.retrieval.memory.facts import FactMemory
    from vera.services.retrieval.models.embedding import load_embedder
    from vera.services.retrieval.models.rerankers import load_reranker
    from vera.services.retrieval.pipeline.contract import assembler_version
    from vera.services.retrieval.pipeline.retriever import Retriever
    from vera.services.retrieval.vectors.edge import EdgeVectorIndex

    settings, _ = _settings(data_dir)
    rs = settings.retrieval
    setup: dict = {}
    t0 = time.perf_counter()
    embedder = await load_embedder(
        rs.model_path, rs.embed_threads, settings.model_cache_dir, rs.embedding_precision
    )
    setup["embedder"] = embedder.backend
    copy = tmp / "vectors-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(data_dir / "vectors", copy)
    vectors = await EdgeVectorIndex.open(copy, embedder.dimensions)
    info = vectors.shard_info()
    setup["shard"] = {"points": info.points_count, "indexed_vectors": info.indexed_vectors_count,
                      "segments": info.segments_count}
    pool = await create_pool(dsn_of_stack(stack_pid), "retrieval", min_size=1, max_size=2)
    facts: dict[str, object] = {}

    class KeepingMemory(FactMemory):
        """The service's memory, also keeping every fact it indexes: the fact source."""

        def upsert(self, batch, vectors, position: int) -> None:
            facts.update({f.fact_key: f for f in batch})
            super().upsert(batch, vectors, position)

    lexical = DocumentIndex(pool, KeepingMemory(embedder.dimensions))
    reranker = await load_reranker(rs.reranker_path, rs.model_path, limit=rs.rerank_limit)
    try:
        await lexical.load()
        setup["setup_s"] = time.perf_counter() - t0
        retriever = Retriever(embedder, vectors, lexical, DictFacts(facts),
                              candidate_pool=rs.candidate_pool,
                              reranker=reranker, assembler_version=assembler_version(rs))
        yield InProcessPipeline(retriever, embedder, setup, facts)
    finally:
        await lexical.close()
        await pool.close()
        await vectors.close()
        embedder.close()
        reranker.close()


async def measure_queries(stack: LaunchedStack, data_dir: Path, stack_pid: int, project: str,
                          scope: str, questions: list[Question], tmp: Path) -> dict:
    async with in_process_pipeline(data_dir, stack_pid, tmp) as pipeline:
        return {**await ask(stack, project, scope, questions, pipeline), **pipeline.setup,
                "embed_floor_texts_per_s": await embedding_floor(pipeline)}


async def embedding_floor(pipeline: InProcessPipeline) -> float:
    """Bulk indexing's compute floor: the service's embedder alone over FLOOR_TEXTS of the
    stack's facts, sent as the indexer sends a page (one call; it batches by length),
    median of FLOOR_ROUNDS, in texts/s. The stack idles meanwhile."""
    from vera.services.retrieval.indexing.indexer import embedding_text

    texts = [embedding_text(f) for f in list(pipeline.facts.values())[:FLOOR_TEXTS]]
    rates = []
    for _ in range(FLOOR_ROUNDS):
        t0 = time.perf_counter()
        await pipeline.embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - t0))
    return statistics.median(rates)


def process_role(cmd: list[str]) -> str:
    """What a process under ``vera up`` is, from its command line."""
    joined = " ".join(cmd)
    if "serve" in cmd and cmd.index("serve") + 1 < len(cmd):
        return cmd[cmd.index("serve") + 1]
    if "entrypoints.mcp" in joined:
        return "gateway (MCP)"
    if "entrypoints.api" in joined:
        return "api (REST)"
    return Path(cmd[0]).name if cmd else "?"


async def retrieval_start_s(data_dir: Path, stack_pid: int, give_up_s: float = 600.0) -> float:
    """Kills the retrieval process and times until the new one ``vera up`` starts answers
    GetIndexStatus (it serves only once loaded): what one retrieval replica takes to start
    at this corpus size (the model, the BM25 memory read from PostgreSQL, the shard; and
    the supervisor's 0.5 s restart delay)."""
    import psutil

    from vera.errors import VeraError
    from vera.retrieval.v1 import retrieval_pb2
    from vera.rpc.backends import Backends

    settings, _ = _settings(data_dir)
    retrieval = next((p for p in psutil.Process(stack_pid).children(recursive=True)
                      if "retrieval" in p.cmdline()), None)
    if retrieval is None:
        raise RuntimeError("the stack runs no retrieval process")
    t0 = time.perf_counter()
    retrieval.kill()
    retrieval.wait(30)
    while time.perf_counter() - t0 < give_up_s:
        # A fresh channel per probe: a channel that failed to connect waits out gRPC's
        # reconnect backoff (1 s, then 1.6x), which would be timed as start-up.
        backends = Backends.open(settings, caller="cli")
        try:
            await backends.retrieval.GetIndexStatus(
                retrieval_pb2.GetIndexStatusRequest(), timeout=2)
            return time.perf_counter() - t0
        except VeraError:  # the client maps UNAVAILABLE (nothing listening yet) to these
            await asyncio.sleep(0.1)
        finally:
            await backends.close()
    raise TimeoutError("retrieval did not come back")


def peak_memory(stack_pid: int, data_dir: Path) -> dict[str, float]:
    """VmHWM (MiB) of ``vera up``, every process under it, and the embedded PostgreSQL
    (pg_ctl detaches it: found by its data dir; its backends are its children)."""
    import psutil

    def hwm(proc: psutil.Process) -> float | None:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    out: dict[str, float] = {}
    root = psutil.Process(stack_pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            name = "vera up" if proc.pid == stack_pid else process_role(proc.cmdline())
        except psutil.Error:
            continue
        value = hwm(proc)
        if value is not None:
            out[name] = max(out.get(name, 0.0), value)
    pgdata = str((data_dir / "postgres").resolve())
    for proc in psutil.process_iter(["cmdline"]):
        if pgdata in " ".join(proc.info.get("cmdline") or []):
            main = hwm(proc)
            if main is not None:
                out["postgres (postmaster)"] = main
            backends = [v for c in proc.children() if (v := hwm(c)) is not None]
            if backends:
                out["postgres (largest backend)"] = max(backends)
            break
    return {k: round(v, 1) for k, v in out.items()}


def run_size(n_facts: int, questions: int, probes: int, hnsw_wait_s: float,
             keep: Path | None = None) -> dict:
    """One corpus size end to end. With ``keep``, the stack's data stays in
    ``keep/<n_facts>`` and a later run with the same ``keep`` queries it again instead of
    loading and indexing the corpus anew (its load figures are the first run's)."""

    result: dict = {"facts": n_facts}
    wall = time.perf_counter()
    t0 = time.perf_counter()
    corpus = generate(n_facts, questions=questions)
    result["generate_s"] = time.perf_counter() - t0
    project = f"scale-{n_facts // 1000}k"
    with contextlib.ExitStack() as cleanup:
        if keep is None:
            root = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="vera-scale-")))
        else:
            root = keep / str(n_facts)
            root.mkdir(parents=True, exist_ok=True)
        marker = root / LOADED_MARKER
        loaded = json.loads(marker.read_text()) if marker.exists() else None
        if loaded is not None and (loaded["seed"], loaded["facts"]) != (SEED, corpus.facts):
            raise SystemExit(f"{root} holds another corpus; remove it or pick another --keep")
        t0 = time.perf_counter()
        with running_stack(root) as (stack, data_dir, _env):
            result["stack_start_s"] = time.perf_counter() - t0
            stack_pid = int(json.loads((data_dir / "run" / "stack.json").read_text())["pid"])
            if loaded is None:
                paths = write_files(corpus, root)
                print(f"[{n_facts}] loading {corpus.facts} facts in {len(paths)} files",
                      file=sys.stderr)
                result["load"] = asyncio.run(load_corpus(paths, data_dir, project))
                scope = result["load"].pop("scope_id")
                marker.write_text(json.dumps({"seed": SEED, "facts": corpus.facts,
                                              "scope_id": scope, "load": result["load"]}))
            else:
                print(f"[{n_facts}] reusing the corpus loaded in {root}", file=sys.stderr)
                result["load"] = {**loaded["load"], "reused": True}
                scope = loaded["scope_id"]
            print(f"[{n_facts}] load {result['load']['load_s']:.1f} s, all indexed "
                  f"{result['load']['all_indexed_s']:.1f} s; waiting for HNSW",
                  file=sys.stderr)
            result["hnsw_wait"] = asyncio.run(wait_for_hnsw(data_dir, hnsw_wait_s))
            result["hnsw_before_queries"] = hnsw_on_disk(data_dir)
            result["queries"] = asyncio.run(measure_queries(
                stack, data_dir, stack_pid, project, scope, corpus.questions, root))
            result["hnsw_after_queries"] = hnsw_on_disk(data_dir)
            print(f"[{n_facts}] get_context p50: MCP client "
                  f"{result['queries']['mcp_ms']['p50']:.1f} ms, in process "
                  f"{result['queries']['in_process_ms']['p50']:.1f} ms; freshness",
                  file=sys.stderr)
            result["freshness"] = asyncio.run(
                freshness(stack, data_dir, project, scope, probes))
            result["peak_rss_mib"] = peak_memory(stack_pid, data_dir)
            # Killed twice: the first start refills the memory from every document (its
            # snapshot deleted first: a kept corpus's stack has one from its last stop) and
            # leaves a snapshot; the second reloads it (the supervisor's delay doubles to
            # 1 s for a child that crashes again within 60 s).
            from vera.services.retrieval.server import MEMORY_SNAPSHOT

            (data_dir / MEMORY_SNAPSHOT).unlink(missing_ok=True)
            result["retrieval_start_s"] = asyncio.run(retrieval_start_s(data_dir, stack_pid))
            result["retrieval_start_from_snapshot_s"] = asyncio.run(
                retrieval_start_s(data_dir, stack_pid))
    q = result["queries"]
    p50 = {name: q[f"{name}_ms"]["p50"] for name in ("mcp", "http", "in_process", "embed")}
    result["ratios"] = {
        "mcp_p50_over_in_process_p50": p50["mcp"] / p50["in_process"],
        "http_p50_over_in_process_p50": p50["http"] / p50["in_process"],
        "mcp_p95_over_mcp_p50": q["mcp_ms"]["p95"] / p50["mcp"],
        "http_p95_over_http_p50": q["http_ms"]["p95"] / p50["http"],
        "mcp_p50_over_embed_p50": p50["mcp"] / p50["embed"],
        "http_p50_over_embed_p50": p50["http"] / p50["embed"],
        "in_process_p50_over_embed_p50": p50["in_process"] / p50["embed"],
    }
    result["wall_s"] = time.perf_counter() - wall
    return result


async def ask_interleaved(stack: LaunchedStack, projects: list[tuple[str, list[Question]]]) -> dict:
    """``knowledge_get_context`` over the MCP HTTP interface (httpx, one JSON-RPC POST),
    the projects' questions alternating, so the box's load and the stack's caches hit
    every project alike."""
    import httpx

    from bench.gateway_overhead import MODERN, request_body, request_headers

    tool = "knowledge_get_context"
    ms: dict[str, list[float]] = {project: [] for project, _ in projects}
    hits = dict.fromkeys(ms, 0)
    errors = 0
    rounds = min(len(questions) for _, questions in projects)
    async with httpx.AsyncClient(timeout=60) as http:
        for index in range(-3, rounds):  # three warm-up rounds
            for project, questions in projects:
                q = questions[max(index, 0)]
                args = {"query": q.text, "project": project, "limit": LIMIT,
                        "token_budget": TOKEN_BUDGET}
                t0 = time.perf_counter()
                response = await http.post(
                    stack.mcp_url, json=request_body(tool, MODERN, args),
                    headers=request_headers(tool, MODERN, stack.mcp_token()))
                took = (time.perf_counter() - t0) * 1000
                if index < 0:
                    continue
                answer = response.json().get("result", {}) if response.status_code == 200 else {}
                if not answer or answer.get("isError"):
                    errors += 1
                    continue
                ms[project].append(took)
                hits[project] += _hit(answer.get("structuredContent"), q)
    return {"http_ms": {p: _pct(v) for p, v in ms.items()},
            "hit@10": {p: hits[p] / rounds for p in ms}, "errors": errors}


def run_growth(small: int, large: int, questions: int, hnsw_wait_s: float) -> dict:
    """Two projects of ``small`` and ``large`` facts in one stack, asked alternately: how
    get_context grows with the corpus, free of run-to-run drift between stacks. Every
    question is asked twice, in two rounds, each with its own ratio."""

    wall = time.perf_counter()
    if not 0 < small < large:
        raise SystemExit("--scale-growth: SMALL,LARGE with 0 < SMALL < LARGE")
    corpora = {f"growth-{n}": generate(n, SEED + i, questions=questions)
               for i, n in enumerate((small, large))}
    result: dict[str, Any] = {"facts": {p: c.facts for p, c in corpora.items()}, "load": {}}
    with tempfile.TemporaryDirectory(prefix="vera-growth-") as tmp, \
            running_stack(Path(tmp)) as (stack, data_dir, _env):
        for project, corpus in corpora.items():
            (Path(tmp) / project).mkdir()
            paths = write_files(corpus, Path(tmp) / project)
            print(f"[growth] loading {corpus.facts} facts into {project}", file=sys.stderr)
            loaded = asyncio.run(load_corpus(paths, data_dir, project))
            loaded.pop("scope_id")
            result["load"][project] = loaded
        result["hnsw_wait"] = asyncio.run(wait_for_hnsw(data_dir, hnsw_wait_s))
        asked = [(p, c.questions) for p, c in corpora.items()]
        result["queries"] = asyncio.run(ask_interleaved(stack, asked))
        # The same questions again: the BM25 leg keeps a term's weights from its second
        # use until the scope's next write, so this round shows what the first pays for
        # making them (without writes in between, as here).
        result["asked_again"] = asyncio.run(ask_interleaved(stack, asked))
    small_p, large_p = corpora
    for key, ratio in (("queries", "large_p50_over_small_p50"),
                       ("asked_again", "asked_again_large_p50_over_small_p50")):
        p50 = {p: result[key]["http_ms"][p]["p50"] for p in corpora}
        result[ratio] = p50[large_p] / p50[small_p]
    result["wall_s"] = time.perf_counter() - wall
    print(f"[growth] get_context p50 over MCP HTTP, ratio {large_p}/{small_p}: "
          f"{result['large_p50_over_small_p50']:.2f} first asked, "
          f"{result['asked_again_large_p50_over_small_p50']:.2f} asked again", file=sys.stderr)
    return result


def format_table(results: list[dict]) -> str:

    def f(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"

    header = ["facts", "MCP client p50 / p95 ms", "MCP HTTP p50 / p95 ms", "in-proc p50 ms",
              "embed p50 ms", "client/in-proc", "HTTP/in-proc", "HTTP p95/p50",
              "HTTP/embed", "hit@10", "load f/s", "index tail s", "e2e f/s",
              "embedder alone texts/s", "fresh p95 s", "HNSW pts",
              "retrieval start s (refill / snapshot)"]
    rows = [header]
    for r in results:
        q, ra = r["queries"], r["ratios"]
        rows.append([
            str(r["facts"]), f"{f(q['mcp_ms']['p50'])} / {f(q['mcp_ms']['p95'])}",
            f"{f(q['http_ms']['p50'])} / {f(q['http_ms']['p95'])}",
            f(q["in_process_ms"]["p50"]), f(q["embed_ms"]["p50"]),
            f(ra["mcp_p50_over_in_process_p50"], 2), f(ra["http_p50_over_in_process_p50"], 2),
            f(ra["http_p95_over_http_p50"], 2), f(ra["http_p50_over_embed_p50"], 2),
            f(q["mcp_hit@10"], 3), f(r["load"]["load_facts_per_s"], 0),
            f(r["load"]["index_tail_s"]), f(r["load"]["end_to_end_facts_per_s"], 0),
            f(q.get("embed_floor_texts_per_s"), 0), f(r["freshness"]["s"]["p95"], 3),
            f"{q['shard']['indexed_vectors']}/{q['shard']['points']}",
            f"{f(r.get('retrieval_start_s'))} / {f(r.get('retrieval_start_from_snapshot_s'))}"])
    return render_table(rows)


def format_memory(results: list[dict]) -> str:

    names = sorted({k for r in results for k in r["peak_rss_mib"]})
    rows = [["process (VmHWM MiB / KiB per fact)", *(str(r["facts"]) for r in results)]]
    for name in names:
        cells = []
        for r in results:
            mib = r["peak_rss_mib"].get(name)
            cells.append("-" if mib is None else f"{mib:.0f} / {mib * 1024 / r['facts']:.2f}")
        rows.append([name, *cells])
    return render_table(rows)


def main(sizes: list[int], out: Path, *, questions: int = 200,
         probes: int = FRESHNESS_PROBES, hnsw_wait_s: float = 240.0,
         keep: Path | None = None, growth: tuple[int, int] | None = None) -> int:

    wall = time.perf_counter()
    results = []
    for n in sizes:
        results.append(run_size(n, questions, probes, hnsw_wait_s, keep))
    growth_result = run_growth(*growth, questions, hnsw_wait_s) if growth else None
    now = dt.datetime.now(dt.UTC)
    machine = machine_info()
    table, memory = format_table(results), format_memory(results)
    print()
    print(f"Scale, generated corpus, {now:%Y-%m-%d}, {machine['cpu_count']} CPUs "
          f"({machine.get('cpu_model', machine['machine'])}), Python {machine['python']}")
    if results:
        print(table)
        print()
        print(memory)
    if growth_result:
        small_p, large_p = growth_result["facts"]
        for key, ratio, when in (
            ("queries", "large_p50_over_small_p50", "first asked"),
            ("asked_again", "asked_again_large_p50_over_small_p50", "asked again"),
        ):
            http = growth_result[key]["http_ms"]
            print(f"growth, one stack, asked alternately ({when}): get_context p50 over MCP "
                  f"HTTP {small_p} {http[small_p]['p50']:.1f} ms, {large_p} "
                  f"{http[large_p]['p50']:.1f} ms ({growth_result[ratio]:.2f}x)")
    total = time.perf_counter() - wall
    print(f"\nwall time {total:.1f} s", file=sys.stderr)
    report = {"bench": "generated-corpus scale", "date": now.isoformat(timespec="seconds"),
              "machine": machine, "seed": SEED,
              "settings": {"limit": LIMIT, "token_budget": TOKEN_BUDGET,
                           "questions": questions, "freshness_probes": probes,
                           "quota_enabled": False, "hnsw_wait_s": hnsw_wait_s},
              "results": results, "growth": growth_result, "table": table,
              "memory_table": memory, "wall_s": total}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


def cli(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="scripts/bench scale",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--scale-sizes", default="10000",
                        help="comma-separated corpus sizes (default 10000)")
    parser.add_argument("--scale-100k", action="store_true",
                        help="add the 100k-fact corpus (does not fit 15 min on 2 cores)")
    parser.add_argument("--scale-questions", type=int, default=200)
    parser.add_argument("--scale-probes", type=int, default=FRESHNESS_PROBES,
                        help="index freshness probes")
    parser.add_argument("--scale-hnsw-wait", type=float, default=240.0,
                        help="seconds to wait at most for the HNSW build before querying")
    parser.add_argument("--scale-out", "--out", dest="out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--scale-keep", type=Path, metavar="DIR",
                        help="keep each size's stack data in DIR/<facts>; a later run with "
                             "the same DIR queries it again without reloading")
    parser.add_argument("--scale-growth", metavar="SMALL,LARGE",
                        help="also load two projects of SMALL and LARGE facts into one stack "
                             "and ask them alternately (get_context p50 large / small)")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.scale_sizes.split(",") if x.strip()]
    growth = None
    if args.scale_growth:
        sizes_given = [int(x) for x in args.scale_growth.split(",")]
        if len(sizes_given) != 2:
            parser.error("--scale-growth takes two sizes: SMALL,LARGE")
        growth = (sizes_given[0], sizes_given[1])
    if args.scale_100k and 100_000 not in sizes:
        sizes.append(100_000)
    return main(sizes, args.out, questions=args.scale_questions, probes=args.scale_probes,
                hnsw_wait_s=args.scale_hnsw_wait, keep=args.scale_keep, growth=growth)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
