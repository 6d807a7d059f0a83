"""What the scale bench measures against a running ``vera up`` stack: the load through
``vera ingest``'s loader and the tail until indexed, the HNSW build, questions over the MCP
client, over plain HTTP and in process over the same indexes, one query embedding, the
embedder's bulk rate, index freshness, a retrieval restart and each process's peak RSS."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import dsn_of_stack
from bench.scale_corpus import Question

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

LIMIT = 10
TOKEN_BUDGET = 32000
FRESHNESS_PROBES = 20
FRESHNESS_POLL_S = 0.02
FRESHNESS_GIVE_UP_S = 10.0
INDEX_TIMEOUT_S = 3600.0
FLOOR_TEXTS = 1024  # the embedder alone, bulk indexing's floor
FLOOR_ROUNDS = 3

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
    headers = request_headers(tool, MODERN, stack.mcp_token())  # minted once, not timed
    async with stack.mcp_client() as client, httpx.AsyncClient(timeout=60) as http:
        for index, q in enumerate([*questions[:3], *questions]):  # three warm-up rounds
            args = {"query": q.text, "project": project, "limit": LIMIT,
                    "token_budget": TOKEN_BUDGET}
            t0 = time.perf_counter()
            result = await client.call_tool(tool, args)
            t1 = time.perf_counter()
            response = await http.post(stack.mcp_url, json=request_body(tool, MODERN, args),
                                       headers=headers)
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
    headers = request_headers(tool, MODERN, stack.mcp_token())  # minted once, not timed
    async with httpx.AsyncClient(timeout=60) as http:
        for index in range(-3, rounds):  # three warm-up rounds
            for project, questions in projects:
                q = questions[max(index, 0)]
                args = {"query": q.text, "project": project, "limit": LIMIT,
                        "token_budget": TOKEN_BUDGET}
                t0 = time.perf_counter()
                response = await http.post(
                    stack.mcp_url, json=request_body(tool, MODERN, args), headers=headers)
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
