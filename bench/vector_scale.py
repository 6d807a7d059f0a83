"""The qdrant-edge vector leg alone at scale: memory and search cost against corpus size.

    scripts/bench vector-scale [--big 100000] [--small 1000] [--queries 200] [--out PATH]
                                 [--locomo]

In process, no stack: the service's own ``EdgeVectorIndex`` (its shard configuration,
payload indexes and filters) filled as the indexer fills it (pages of 256 facts whose
payloads carry a transaction time, so each upsert also supersedes by filter) with
deterministic unit vectors of MiniLM's dimension, clustered as text embeddings are. Each
case runs in a child process of its own, so its peak (VmHWM) is its own:

- ``small``: a shard holding only the small scope (a small project alone);
- ``mixed``: one shard holding the big scope and the small one (that small project in a
  deployment that also serves a big one, and the big project's own queries);
- ``reopened``: the mixed shard opened again from disk (a restarted service).

Per case: resident memory (VmRSS, RssAnon, RssFile from /proc/self/status) before the
shard opens, after the upserts, at its peak during the HNSW build (``optimize``; the
build itself runs in a child process, whose memory is its own and not counted) and
after it, as deltas and bytes per point; the event loop's longest stall during the
upserts and the build; search p50/p95 per scope, the scopes
interleaved; and recall@10 / recall@50 of each search against the exact top (numpy over
the same vectors), so a cheaper configuration shows what it costs in exactness.
``--locomo`` adds the in-process LoCoMo quality of the full pipeline (bench/ablation.py's
"full pipeline" row: hit@5, recall@10) over the same adapter.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench import record
from bench.metrics import percentile

DIMENSIONS = 384
PAGE = 256  # the indexer's page size
POOL = 50  # the pipeline's candidate pool: what one dense-leg search asks for
SEED = 7
CENTROIDS = 2000
# Each point is a centroid plus noise of this norm (cosine to its centroid ~0.7), so
# neighbourhoods exist as they do for text embeddings rather than uniform noise.
NOISE = 1.0
T0 = datetime(2025, 1, 1, tzinfo=UTC)
PREDICATES = ("owned_by", "uses_database", "runs_on", "depends_on", "documented_in")
STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")
MIB = 1024 * 1024
QUERY_PAGE = 1 << 30  # the queries' own stream, past every page's
SCOPE_STREAMS = {"big": 0, "small": 1}  # each scope's vectors are the same in every case


def status() -> dict[str, int]:
    """This process's memory figures from /proc/self/status, in bytes."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in STATUS_FIELDS:
                out[name] = int(rest.split()[0]) * 1024
    return out


# The sampler is a process of its own: qdrant-edge's optimize holds the GIL for the whole
# HNSW build, so a thread of the measured process would see nothing of its peak.
SAMPLER = r"""
import json, sys, threading, time
pid, fields, peak, lock = int(sys.argv[1]), sys.argv[2:], {}, threading.Lock()
def loop():
    while True:
        try:
            with open(f"/proc/{pid}/status") as f:
                now = {k: int(v.split()[0]) * 1024 for k, _, v in
                       (line.partition(":") for line in f) if k in fields}
        except OSError:
            return
        with lock:
            for k, v in now.items():
                peak[k] = max(peak.get(k, 0), v)
        time.sleep(0.02)
threading.Thread(target=loop, daemon=True).start()
for _ in sys.stdin:
    with lock:
        print(json.dumps(peak), flush=True)
        peak.clear()
"""


class Sampler:
    """The highest VmRSS / RssAnon / RssFile of this process, sampled every 20 ms by a
    child process, since the last ``reset``."""

    def __init__(self) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-c", SAMPLER, str(os.getpid()), "VmRSS", "RssAnon", "RssFile"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def reset(self) -> dict[str, int]:
        assert self._child.stdin is not None and self._child.stdout is not None
        self._child.stdin.write("\n")
        self._child.stdin.flush()
        return json.loads(self._child.stdout.readline())

    def close(self) -> None:
        assert self._child.stdin is not None
        self._child.stdin.close()
        self._child.wait()


def unit_rows(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def centroids() -> np.ndarray:
    return unit_rows(np.random.default_rng(SEED).standard_normal((CENTROIDS, DIMENSIONS)))


def page_vectors(scope_index: int, page: int, size: int, cents: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng([SEED, scope_index, page])
    picks = rng.integers(0, len(cents), size)
    noise = rng.standard_normal((size, DIMENSIONS)) * (NOISE / np.sqrt(DIMENSIONS))
    return unit_rows(cents[picks] + noise)


def queries(scope_index: int, count: int, cents: np.ndarray) -> np.ndarray:
    return page_vectors(scope_index, QUERY_PAGE, count, cents)


def page_facts(scope: str, start: int, size: int) -> list:
    from vera.services.retrieval.domain import Fact

    return [
        Fact(
            fact_key=f"{scope}:{i}",
            version_id=f"{scope}:{i}:v1",
            scope_id=scope,
            subject=f"service-{i % 997}",
            predicate=PREDICATES[i % len(PREDICATES)],
            object=f"value {i}",
            valid_from=T0,
            recorded_at=T0 + timedelta(seconds=i),
            document_type="adr" if i % 7 == 0 else "runbook",
            source_type="repository",
        )
        for i in range(start, start + size)
    ]


class ExactTop:
    """The exact top-k version ids per query, kept while the pages stream past."""

    def __init__(self, q: np.ndarray, k: int) -> None:
        self.q = q
        self.k = k
        self.scores = np.full((len(q), 0), -np.inf, dtype=np.float32)
        self.ids = np.zeros((len(q), 0), dtype=np.int64)

    def add(self, vectors: np.ndarray, start: int) -> None:
        scores = np.concatenate([self.scores, self.q @ vectors.T], axis=1)
        page = np.broadcast_to(np.arange(start, start + len(vectors)), (len(self.q), len(vectors)))
        ids = np.concatenate([self.ids, page], axis=1)
        if scores.shape[1] > self.k:
            keep = np.argpartition(-scores, self.k - 1, axis=1)[:, : self.k]
            scores = np.take_along_axis(scores, keep, axis=1)
            ids = np.take_along_axis(ids, keep, axis=1)
        order = np.argsort(-scores, axis=1)
        self.scores = np.take_along_axis(scores, order, axis=1)
        self.ids = np.take_along_axis(ids, order, axis=1)


def recall(found: list[str], exact: np.ndarray, scope: str, k: int) -> float:
    want = {f"{scope}:{int(i)}:v1" for i in exact[:k]}
    return len(want & set(found[:k])) / len(want)


async def fill(
    index, scope: str, scope_index: int, size: int, tops: ExactTop, cents: np.ndarray
) -> float:
    started = time.perf_counter()
    for page, start in enumerate(range(0, size, PAGE)):
        n = min(PAGE, size - start)
        vecs = page_vectors(scope_index, page, n, cents)
        tops.add(vecs, start)
        await index.upsert(page_facts(scope, start, n), vecs.tolist())
    return time.perf_counter() - started


async def time_searches(
    index, scopes: list[tuple[str, np.ndarray, np.ndarray]], rounds: int
) -> dict:
    """Every scope's queries, interleaved (one of each per round), through the adapter."""
    from vera.services.retrieval.domain import IndexQuery

    now = datetime.now(UTC)
    ms: dict[str, list[float]] = {s: [] for s, _, _ in scopes}
    r10: dict[str, list[float]] = {s: [] for s, _, _ in scopes}
    r50: dict[str, list[float]] = {s: [] for s, _, _ in scopes}
    for r in range(rounds):
        for scope, q, exact in scopes:
            i = r % len(q)
            query = IndexQuery(scope_ids=(scope,), as_of=now)
            started = time.perf_counter()
            hits = await index.search(q[i].tolist(), query, POOL)
            ms[scope].append((time.perf_counter() - started) * 1000)
            found = [h.version_id for h in hits]
            r10[scope].append(recall(found, exact[i], scope, 10))
            r50[scope].append(recall(found, exact[i], scope, POOL))
    return {
        s: {
            "p50_ms": percentile(ms[s], 50),
            "p95_ms": percentile(ms[s], 95),
            "recall@10": float(np.mean(r10[s])),
            f"recall@{POOL}": float(np.mean(r50[s])),
            "searches": len(ms[s]),
        }
        for s in ms
    }


class LoopStalls:
    """The longest the event loop went without running a 10 ms ticker (a call that holds
    the GIL stalls every coroutine of the service for its whole length)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now

    async def __aenter__(self) -> LoopStalls:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


def mib(figures: dict[str, int], base: dict[str, int]) -> dict[str, float]:
    return {k: round((figures[k] - base.get(k, 0)) / MIB, 1) for k in figures if k != "VmHWM"}


async def child(case: str, path: Path, big: int, small: int, rounds: int) -> dict:
    from vera.services.retrieval.vectors.edge import EdgeVectorIndex

    cents = centroids()
    sizes = {"small": small} if case == "small" else {"big": big, "small": small}
    q = {s: queries(SCOPE_STREAMS[s], 100, cents) for s in sizes}
    tops = {s: ExactTop(q[s], POOL) for s in sizes}
    sampler = Sampler()
    base = status()
    report: dict = {"case": case, "points": sum(sizes.values())}
    if case == "reopened":
        # The exact tops are recomputed from the same deterministic pages.
        for scope, size in sizes.items():
            for page, start in enumerate(range(0, size, PAGE)):
                tops[scope].add(
                    page_vectors(SCOPE_STREAMS[scope], page, min(PAGE, size - start), cents), start
                )
        base = status()
        sampler.reset()
        started = time.perf_counter()
        index = await EdgeVectorIndex.open(path, DIMENSIONS)
        report["open_s"] = round(time.perf_counter() - started, 2)
    else:
        index = await EdgeVectorIndex.open(path, DIMENSIONS)
        report["upsert_s"] = {}
        async with LoopStalls() as stalls:  # optimizations a bulk load starts on its own
            for scope, size in sizes.items():
                seconds = await fill(index, scope, SCOPE_STREAMS[scope], size, tops[scope], cents)
                report["upsert_s"][scope] = round(seconds, 1)
        report["upsert_longest_loop_stall_s"] = round(stalls.longest, 2)
        after = status()
        report["rss_after_upserts_mib"] = mib(after, base)
        report["peak_during_upserts_mib"] = mib(sampler.reset(), base)
        scopes = [(s, q[s], tops[s].ids) for s in sizes]
        report["search_unoptimized"] = await time_searches(index, scopes, max(rounds // 4, 10))
        sampler.reset()
        started = time.perf_counter()
        async with LoopStalls() as stalls:
            await index.optimize()
        report["optimize_s"] = round(time.perf_counter() - started, 1)
        report["optimize_longest_loop_stall_s"] = round(stalls.longest, 2)
        report["peak_during_optimize_mib"] = mib(sampler.reset(), base)
    scopes = [(s, q[s], tops[s].ids) for s in sizes]
    report["search"] = await time_searches(index, scopes, rounds)
    end = status()
    report["rss_end_mib"] = mib(end, base)
    report["peak_mib"] = mib(sampler.reset(), base)
    report["vmhwm_delta_mib"] = round((end["VmHWM"] - base["VmRSS"]) / MIB, 1)
    report["bytes_per_point"] = {
        k: round((end[k] - base[k]) / report["points"]) for k in ("VmRSS", "RssAnon", "RssFile")
    }
    report["disk_mib"] = round(
        sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file()) / MIB, 1
    )
    await index.close()
    sampler.close()
    return report


async def locomo_quality() -> dict:
    """The full pipeline's LoCoMo dev quality in process (bench/ablation.py's first row)."""
    from bench import locomo
    from bench.ablation import LIMIT, DictFacts, index_conversations
    from bench.harness import DEFAULT_DATA
    from bench.metrics import Tally
    from vera.config import RetrievalSettings
    from vera.services.retrieval.documents.index import DocumentIndex
    from vera.services.retrieval.domain import Filters
    from vera.services.retrieval.models.embedding import load_embedder
    from vera.services.retrieval.models.rerankers import load_reranker
    from vera.services.retrieval.pipeline.retriever import Retriever

    conversations = locomo.load(DEFAULT_DATA)
    with tempfile.TemporaryDirectory(prefix="vera-vector-scale-") as tmp:
        embedder = await load_embedder(None, 2, Path(tmp), RetrievalSettings().embedding_precision)
        vectors, memory, facts = await index_conversations(
            conversations, embedder, Path(tmp), "index"
        )
        lexical = DocumentIndex(None, memory)
        retriever = Retriever(
            embedder,
            vectors,
            lexical,
            DictFacts(facts),
            candidate_pool=POOL,
            reranker=await load_reranker(None, None),
            assembler_version="bench-vector-scale",
        )
        tally = Tally()
        for conv in conversations:
            for q in conv.questions:
                outcome = await retriever.search([conv.project], q.question, LIMIT, Filters())
                tally.add(
                    [[c.locator for c in r.fact.citations] for r in outcome.results],
                    q.evidence,
                    str(q.category),
                )
        await lexical.close()
        await vectors.close()
        embedder.close()
    summary = tally.summary()
    return {k: summary[k] for k in ("questions", "hit@5", "recall@10", "mrr@10")}


def run_child(case: str, path: Path, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        "-m",
        "bench.vector_scale",
        "--child",
        case,
        "--path",
        str(path),
        "--big",
        str(args.big),
        "--small",
        str(args.small),
        "--queries",
        str(args.queries),
    ]
    print(f"[vector_scale] {case} ...", file=sys.stderr, flush=True)
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(reports: list[dict]) -> str:
    lines = []
    for r in reports:
        lines.append(f"== {r['case']} ({r['points']} points, disk {r['disk_mib']} MiB)")
        for key in (
            "upsert_s",
            "upsert_longest_loop_stall_s",
            "optimize_s",
            "optimize_longest_loop_stall_s",
            "open_s",
        ):
            if key in r:
                lines.append(f"  {key}: {r[key]}")
        for key in (
            "rss_after_upserts_mib",
            "peak_during_upserts_mib",
            "peak_during_optimize_mib",
            "rss_end_mib",
            "peak_mib",
        ):
            if key in r:
                lines.append(f"  {key:26} " + "  ".join(f"{k} {v}" for k, v in r[key].items()))
        lines.append(f"  vmhwm_delta_mib            {r['vmhwm_delta_mib']}")
        lines.append(
            "  bytes_per_point            "
            + "  ".join(f"{k} {v}" for k, v in r["bytes_per_point"].items())
        )
        for key in ("search_unoptimized", "search"):
            for scope, s in r.get(key, {}).items():
                lines.append(
                    f"  {key:18} {scope:6} p50 {s['p50_ms']:.2f} ms  p95 "
                    f"{s['p95_ms']:.2f} ms  recall@10 {s['recall@10']:.3f}  "
                    f"recall@{POOL} {s[f'recall@{POOL}']:.3f}  (n={s['searches']})"
                )
    return "\n".join(lines)


def figures(reports: list[dict], ratios: dict[str, float]) -> list[dict]:
    """What ``table`` prints, as the run's record (bench/record.py)."""
    searches = [[r["case"], r["points"], key, scope, s["p50_ms"], s["p95_ms"], s["recall@10"],
                 s[f"recall@{POOL}"]]
                for r in reports for key in ("search_unoptimized", "search")
                for scope, s in r.get(key, {}).items()]
    writes = [[r["case"], r["points"],
               ", ".join(f"{scope} {seconds}" for scope, seconds in r["upsert_s"].items())
               if "upsert_s" in r else "-",
               r.get("upsert_longest_loop_stall_s", "-"), r.get("optimize_s", "-"),
               r.get("optimize_longest_loop_stall_s", "-"), r["vmhwm_delta_mib"]]
              for r in reports]
    return [
        record.table(["case", "points", "search", "scope", "p50 ms", "p95 ms", "recall@10",
                      f"recall@{POOL}"], searches, digits=[None, 0, None, None, 2, 2, 3, 3]),
        record.table(["case", "points", "upserts s by scope", "longest loop stall s", "build s",
                      "build's longest loop stall s", "VmHWM growth MiB"], writes,
                     digits=[None, 0, 2, 2, 2, 2, 1]),
        record.table(["p50 ratio", "x"], [[name, value] for name, value in ratios.items()],
                     digits=[None, 2]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench vector-scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--big", type=int, default=100_000, help="points in the big scope")
    parser.add_argument("--small", type=int, default=1_000, help="points in the small scope")
    parser.add_argument(
        "--queries", type=int, default=200, help="search rounds per case (one query per scope each)"
    )
    parser.add_argument("--out", type=Path, help="JSON report path")
    parser.add_argument(
        "--locomo",
        action="store_true",
        help="also the in-process LoCoMo dev quality of the full pipeline",
    )
    parser.add_argument("--child", choices=("small", "mixed", "reopened"), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        report = asyncio.run(child(args.child, args.path, args.big, args.small, args.queries))
        print(json.dumps(report))
        return 0
    reports = []
    with tempfile.TemporaryDirectory(prefix="vera-vector-scale-") as tmp:
        reports.append(run_child("small", Path(tmp) / "small", args))
        reports.append(run_child("mixed", Path(tmp) / "mixed", args))
        reports.append(run_child("reopened", Path(tmp) / "mixed", args))
    small_alone = reports[0]["search"]["small"]["p50_ms"]
    mixed = reports[1]["search"]
    ratios = {
        "small in mixed / small alone": mixed["small"]["p50_ms"] / small_alone,
        "big / small (same shard)": mixed["big"]["p50_ms"] / mixed["small"]["p50_ms"],
        "big / small alone": mixed["big"]["p50_ms"] / small_alone,
    }
    result: dict = {"cases": reports, "p50_ratios": ratios, "cpus": os.cpu_count()}
    print(table(reports))
    for name, value in ratios.items():
        print(f"p50 ratio {name}: {value:.2f}x")
    if args.locomo:
        print("[vector_scale] LoCoMo ...", file=sys.stderr, flush=True)
        result["locomo"] = asyncio.run(locomo_quality())
        print(
            "LoCoMo dev, full pipeline in process: "
            + "  ".join(f"{k} {v}" for k, v in result["locomo"].items())
        )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    record.write("vector-scale", argv if argv is not None else sys.argv[1:],
                 figures(reports, ratios),
                 study="vector-scale-1m" if args.big >= 1_000_000 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
