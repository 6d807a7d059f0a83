"""code-repos: questions about code repositories, answered by facts with file evidence.

    scripts/bench code-repos [--no-stack] [--out PATH]

The set (bench/data/code_repos/, its PROVENANCE.md: three public repositories, 85
hand-written facts citing file and line range, 71 questions written before any run) is
loaded with `vera ingest` into one project of a stack started as a user starts one, as a
harvest loads a repository (the file is the source, the line range the locator, the lines the
evidence); every question is asked through the official MCP client (``knowledge_search`` and
``knowledge_get_context``, limit 10) and scored by the facts its results cite, next to stemmed
BM25 over the text the lexical leg indexes (statement and evidence). Then in process, in the
same run, the service's Retriever over the same facts with its fusion as shipped and with
issue 45 item 1's ranking terms off (entity bonus back to 0.2, no time bonus; and the entity
stage off too): those terms are not settings, so the before / after is measured there.
Writes the JSON report (per question) and the bench's record (bench/records/code-repos.json).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from posixpath import dirname
from typing import TYPE_CHECKING, Any

from bench import record
from bench.ablation import BEFORE_ISSUE_45_ITEM_1, DictFacts, index_facts
from bench.bm25 import BM25
from bench.harness import (
    INGEST_DEADLINE_SECONDS,
    LIMIT,
    ROOT,
    TOKEN_BUDGET,
    ingest_file,
    running_stack,
    timed_call,
    wait_until_retrieval_idle,
)
from bench.metrics import METRIC_NAMES, Tally
from vera.config import RetrievalSettings
from vera.harvest import records as harvest_records
from vera.harvest.facts import Fact as HarvestFact
from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.domain import Citation, Filters
from vera.services.retrieval.domain import Fact as RetrievalFact
from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT, fact_text
from vera.services.retrieval.models.embedding import load_embedder
from vera.services.retrieval.models.rerankers import load_reranker
from vera.services.retrieval.pipeline.retriever import Fusion, Retriever, Stages

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

DATA = ROOT / "bench" / "data" / "code_repos"
DEFAULT_OUT = ROOT / "bench-results" / "code-repos.json"
PROJECT = "code-repos"
SEVERAL = "several repositories"
STACK_SYSTEMS = {"VERA knowledge_search": ("knowledge_search", {}),
                 "VERA knowledge_get_context": ("knowledge_get_context",
                                                {"token_budget": TOKEN_BUDGET})}
BM25_SYSTEM = "BM25 (stemmed, statement + evidence)"
SHIPPED = "fusion as shipped (entity bonus 0.3, time bonus 0.2)"
# The ranking terms issue 45 item 1 added or changed (pipeline.Fusion; commit 7a90749),
# switched off: no setting reaches them, so the bench builds the Retriever with each.
IN_PROCESS: dict[str, tuple[dict[str, bool], dict[str, Any]]] = {
    SHIPPED: ({}, {}),
    "issue 45 item 1 off (entity bonus 0.2, no time bonus)": ({}, BEFORE_ISSUE_45_ITEM_1),
    "entity stage and time bonus off": ({"entities": False}, {"time_bonus": 0.0}),
}


# --- the set -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Repository:
    key: str
    repository: str  # the canonical identity, github.com/owner/name
    url: str
    commit: str
    committed_at: dt.datetime
    license: str
    license_file: str
    files: dict[str, int]  # path -> its number of lines at the commit


@dataclass(frozen=True)
class CodeFact:
    id: str
    repository: str
    path: str
    start: int
    end: int
    subject: str
    predicate: str
    object: str
    document_type: str
    evidence: str

    def harvested(self) -> HarvestFact:
        """The fact as a harvest states it (its locator, and the record a harvest files)."""
        return HarvestFact(subject=self.subject, predicate=self.predicate, object=self.object,
                           path=self.path, start=self.start, end=self.end, slot=self.id,
                           document_type=self.document_type, evidence=self.evidence)

    @property
    def citation(self) -> tuple[str, str]:
        """(source id, locator): what a result's citation of this fact carries."""
        return harvest_records.source_id(self.repository, self.path), self.harvested().locator


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    facts: tuple[str, ...]


@dataclass(frozen=True)
class CodeSet:
    repositories: dict[str, Repository]  # by canonical identity
    facts: tuple[CodeFact, ...]
    questions: tuple[Question, ...]

    def fact_by_citation(self) -> dict[tuple[str, str], str]:
        return {fact.citation: fact.id for fact in self.facts}

    def group(self, question: Question) -> str:
        """The repository a question is about, by the facts answering it."""
        by_id = {fact.id: fact for fact in self.facts}
        keys = {self.repositories[by_id[i].repository].key for i in question.facts}
        return keys.pop() if len(keys) == 1 else SEVERAL


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def load(directory: Path = DATA) -> CodeSet:
    repositories = {
        value["repository"]: Repository(
            key=key, repository=value["repository"], url=value["url"], commit=value["commit"],
            committed_at=dt.datetime.fromisoformat(value["committed_at"]),
            license=value["license"], license_file=value["license_file"],
            files=dict(value["files"]))
        for key, value in json.loads((directory / "repositories.json").read_text()).items()}
    facts = tuple(CodeFact(
        id=row["id"], repository=row["repository"], path=row["path"], start=row["lines"][0],
        end=row["lines"][1], subject=row["subject"], predicate=row["predicate"],
        object=row["object"], document_type=row["document_type"], evidence=row["evidence"])
        for row in _jsonl(directory / "facts.jsonl"))
    questions = tuple(Question(row["id"], row["question"], tuple(row["facts"]))
                      for row in _jsonl(directory / "questions.jsonl"))
    return CodeSet(repositories, facts, questions)


def to_jsonl_records(codeset: CodeSet) -> list[dict[str, Any]]:
    """The `vera ingest` lines, as a harvest of each repository at its commit files them:
    one source per cited file, one fact per fact (vera.harvest.records)."""
    lines: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for fact in codeset.facts:
        repo = codeset.repositories[fact.repository]
        if (fact.repository, fact.path) not in seen:
            seen.add((fact.repository, fact.path))
            lines.append(harvest_records.source_record(
                repo.repository, repo.commit, repo.committed_at, fact.path))
    for fact in codeset.facts:
        repo = codeset.repositories[fact.repository]
        line = harvest_records.fact_record(fact.harvested(), repo.repository, "",
                                           repo.committed_at)
        assert line is not None  # only a superseded decision has none; these never are
        lines.append(line)
    return lines


def retrieval_facts(codeset: CodeSet, scope_id: str = PROJECT) -> list:
    """The facts as the retrieval service holds them after that load (in-process runs)."""
    out = []
    for fact in codeset.facts:
        repo = codeset.repositories[fact.repository]
        source, locator = fact.citation
        out.append(RetrievalFact(
            fact_key=fact.id, version_id=f"{fact.id}:v1", scope_id=scope_id,
            subject=fact.subject, predicate=fact.predicate, object=fact.object,
            valid_from=repo.committed_at, repository=repo.repository,
            code_path=dirname(fact.path), document_type=fact.document_type,
            source_type=harvest_records.SOURCE_TYPE,
            citations=(Citation(source_id=source, locator=locator, title=fact.path,
                                excerpt=fact.evidence,
                                source_type=harvest_records.SOURCE_TYPE),)))
    return out


def ranking_from(payload: dict | None, by_citation: dict[tuple[str, str], str],
                 limit: int = LIMIT) -> list[list[str]]:
    """The top ``limit`` results as the fact ids their citations name."""
    results = sorted((payload or {}).get("results") or [],
                     key=lambda r: r.get("rank") if r.get("rank") is not None else 1 << 30)
    return [[by_citation[key] for c in result.get("citations") or []
             if (key := (c.get("source_id") or "", c.get("locator") or "")) in by_citation]
            for result in results[:limit]]


# --- the runs ----------------------------------------------------------------------------


async def ask_stack(stack: LaunchedStack, codeset: CodeSet, tallies: dict[str, Tally],
                    detail: dict[str, dict], errors: list[dict]) -> None:
    by_citation = codeset.fact_by_citation()
    async with stack.mcp_client() as client:
        for tool, extra in STACK_SYSTEMS.values():  # the first call pays one-off costs
            await client.call_tool(tool, {"query": "warm up", "project": PROJECT,
                                          "limit": LIMIT, **extra})
        for q in codeset.questions:
            for system, (tool, extra) in STACK_SYSTEMS.items():
                payload, ms = await timed_call(
                    client, tool, {"query": q.question, "project": PROJECT, "limit": LIMIT,
                                   **extra}, errors, system=system, question=q.id)
                tallies[system].errors += payload is None
                ranking = ranking_from(payload, by_citation)
                score = tallies[system].add(ranking, q.facts, codeset.group(q), ms)
                detail[q.id][system] = {**score, "top": ranking}


def run_bm25(codeset: CodeSet, tally: Tally, detail: dict[str, dict]) -> None:
    facts = retrieval_facts(codeset)
    index = BM25([fact_text(f) for f in facts])
    for q in codeset.questions:
        t0 = time.perf_counter()
        hits = index.search(q.question, LIMIT)
        ms = (time.perf_counter() - t0) * 1000
        ranking = [[facts[i].fact_key] for i, _ in hits]
        detail[q.id][BM25_SYSTEM] = {**tally.add(ranking, q.facts, codeset.group(q), ms),
                                     "top": ranking}


async def run_in_process(codeset: CodeSet, detail: dict[str, dict]) -> dict[str, Tally]:
    """The service's Retriever, FactMemory, qdrant-edge shard and MiniLM over the set's facts
    (bench/ablation.py's setup), once per IN_PROCESS configuration."""
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory(prefix="vera-code-repos-") as tmp:
        embedder = await load_embedder(None, 2, Path(tmp),
                                       RetrievalSettings().embedding_precision)
        vectors, memory, facts = await index_facts([retrieval_facts(codeset)], embedder,
                                                   Path(tmp), "code-repos index")
        reranker = await load_reranker(None, None)
        lexical = DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT)
        for name, (stages, fusion) in IN_PROCESS.items():
            retriever = Retriever(embedder, vectors, lexical, DictFacts(facts),
                                  candidate_pool=50, reranker=reranker,
                                  stages=Stages(**stages), fusion=Fusion(**fusion),
                                  assembler_version="bench-code-repos")
            tally = tallies[name] = Tally()
            await retriever.search([PROJECT], "warm up", LIMIT, Filters())
            for q in codeset.questions:
                t0 = time.perf_counter()
                outcome = await retriever.search([PROJECT], q.question, LIMIT, Filters())
                ms = (time.perf_counter() - t0) * 1000
                ranking = [[r.fact.fact_key] for r in outcome.results]
                detail[q.id][name] = {**tally.add(ranking, q.facts, codeset.group(q), ms),
                                      "top": ranking}
        await lexical.close()
        await vectors.close()
        embedder.close()
    return tallies


# --- report ------------------------------------------------------------------------------


def _row(name: str, summary: dict, latency: bool = True) -> list:
    return [name, *(summary[m] for m in METRIC_NAMES),
            *((summary.get("p50_ms"), summary.get("p95_ms")) if latency else ())]


HEADS = ["hit@5", "hit@10", "recall@5", "recall@10", "MRR@10"]


def tables_of(codeset: CodeSet, stack: dict[str, Tally],
              in_process: dict[str, Tally]) -> list[dict]:
    count = (f"{len(codeset.questions)} questions, {len(codeset.facts)} facts from "
             f"{len(codeset.repositories)} repositories")
    tables = [record.table(
        ["system", *HEADS, "p50 ms", "p95 ms"],
        [_row(name, tally.summary()) for name, tally in stack.items()],
        digits=[None, 3, 3, 3, 3, 3, 1, 1],
        title=(f"Through the stack ({count}; `vera up`, `vera ingest`, the official MCP "
               "client, limit 10), next to BM25 on the same text:" if len(stack) > 1 else
               f"BM25 on the text the lexical leg indexes ({count}; no stack this run):"))]
    if in_process:
        tables.append(record.table(
            ["configuration (in process, same run)", *HEADS, "p50 ms", "p95 ms"],
            [_row(name, tally.summary()) for name, tally in in_process.items()],
            digits=[None, 3, 3, 3, 3, 3, 1, 1]))
    return tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench code-repos",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the set's folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    parser.add_argument("--no-stack", action="store_true",
                        help="skip the stack: BM25 and the in-process runs only")
    parser.add_argument("--ingest-deadline", type=float, default=INGEST_DEADLINE_SECONDS,
                        help="per-call deadline (s) of `vera ingest`")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    wall = time.perf_counter()
    codeset = load(args.data)
    detail: dict[str, dict] = {q.id: {"question": q.question, "facts": list(q.facts)}
                               for q in codeset.questions}
    stack_tallies = {} if args.no_stack else {name: Tally() for name in STACK_SYSTEMS}
    errors: list[dict] = []
    failures: list[dict] = []
    timings: dict[str, float] = {}
    if not args.no_stack:
        with tempfile.TemporaryDirectory(prefix="vera-bench-code-repos-") as tmp:
            root = Path(tmp)
            path = root / "code-repos.jsonl"
            path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n"
                                    for line in to_jsonl_records(codeset)))
            with running_stack(root) as (stack, data_dir, env):
                timings["ingest_s"] = ingest_file(path, PROJECT, data_dir, env, failures,
                                                  args.ingest_deadline)
                timings["index_settle_s"] = wait_until_retrieval_idle(data_dir)
                asyncio.run(ask_stack(stack, codeset, stack_tallies, detail, errors))
    stack_tallies[BM25_SYSTEM] = Tally()
    run_bm25(codeset, stack_tallies[BM25_SYSTEM], detail)
    in_process = asyncio.run(run_in_process(codeset, detail))
    wall_s = time.perf_counter() - wall

    tables = tables_of(codeset, stack_tallies, in_process)
    for figures in tables:
        print("\n".join(["", *record.as_markdown(figures)]))
    for name, tally in stack_tallies.items():
        if tally.errors:
            print(f"WARNING: {name}: {tally.errors} calls returned an MCP error",
                  file=sys.stderr)
    print(f"\nwall time {wall_s:.1f} s", file=sys.stderr)
    report = {"bench": "code-repos", "command": " ".join(["scripts/bench", "code-repos", *argv]),
              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "machine": record.machine_info(), "timings": {**timings, "wall_s": wall_s},
              "summary": {name: t.summary() for name, t in {**stack_tallies,
                                                            **in_process}.items()},
              "by_repository": {name: t.by_category() for name, t in {**stack_tallies,
                                                                    **in_process}.items()},
              "errors": errors, "ingest_failures": failures,
              "questions": list(detail.values())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    written = record.write("code-repos", argv, tables, wall_s=wall_s)
    print(f"wrote {args.out} and {written}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
