"""The scale bench's generated corpus: a deterministic, varied coding organization
(services, teams, libraries, ADRs, runbooks, repositories, code paths; several facts per
source so every fact has neighbours) as `vera ingest` files, with questions generated from
held facts. Used by ``scripts/bench scale``, ``memory-scale``, ``sparse-scale`` and the load
tool's seeded world."""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

FACTS_PER_FILE = 10_000
SEED = 5

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

