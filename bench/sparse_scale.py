"""The lexical leg as Qdrant sparse vectors in a shard per project scope, against today's
in-process BM25, at scale. In process: no stack, no model.

    scripts/bench sparse-scale [--small 1000] [--large 100000] [--prefetch 200,1000]

The scale bench's generated corpus (``bench.memory_scale.facts_of``) in a small and a large
project scope, each held twice: in one FactMemory (today's leg, memory.py) and in a
qdrant-edge shard of its own with bench/lexical_ablation.py's two named sparse vectors
(client-side BM25 saturation and length normalisation, IDF by Qdrant's ``Modifier.Idf``,
``own + CONTEXT_WEIGHT * context`` by a ``Formula`` over one prefetch per field). Alone in
its shard, a scope's statistics are the shard's, so this is the formulation that kept
LoCoMo quality in the ablation (docs/benchmarks.md, "The lexical leg in Qdrant") without a per-query
IDF corpus filter, the one that grew worst with the project.

Reports, per leg (the memory; the shard at each prefetch depth) and project: the lexical
call's p50, the first round (each question asked once; the memory keeps a term's weights
from its second use) apart from the rounds after it, asked interleaved per question; the
large/small ratio; and the share of the memory's top 50 each shard's top 50 holds, with
the largest relative score difference over the facts both found. Where a field's
prefetch holds every fact that field matches (a project no larger than the depth), that
difference is the formulation's parity and is ~0; otherwise a fact one prefetch cut off
scores 0 in that field. The memory also lets a term in over half of a large scope's facts
add only to facts that rarer terms matched, so the two may rank other facts in.
Writes ``bench-results/sparse_scale.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bench import lexical_ablation, memory_scale, record
from bench.harness import ROOT
from bench.record import machine_info

DEFAULT_OUT = ROOT / "bench-results" / "sparse_scale.json"
POOL = memory_scale.CANDIDATE_POOL
QUESTIONS = 100


def _p50_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 3)


def _parity(found: list[Any], expected: list[Any]) -> tuple[float, float]:
    """(share of ``expected``'s versions in ``found``, largest relative score difference
    over the versions both hold)."""
    want = {c.version_id: c.score for c in expected}
    got = {c.version_id: c.score for c in found}
    both = want.keys() & got.keys()
    share = len(both) / len(want) if want else 1.0
    diff = max((abs(got[v] - want[v]) / max(abs(want[v]), 1e-12) for v in both), default=0.0)
    return share, diff


def measure(small_n: int, large_n: int, prefetches: list[int], rounds: int, seed: int) -> dict:
    from vera.services.retrieval.domain import IndexQuery
    from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT, FactMemory

    rng = np.random.default_rng(seed)
    memory = FactMemory(memory_scale.DIMENSIONS)
    projects = {"small": small_n, "large": large_n}
    facts, questions = {}, {}
    position = 1
    for offset, (scope, size) in enumerate(projects.items()):
        facts[scope], questions[scope] = memory_scale.facts_of(size, scope, seed + offset)
        position = memory_scale.fill(memory, facts[scope], rng, position)
    fields = lexical_ablation.Fields(
        memory, {f.version_id: f for scope_facts in facts.values() for f in scope_facts}
    )
    report: dict[str, Any] = {"machine": machine_info(), "facts": projects, "fill_s": {}}
    with tempfile.TemporaryDirectory(prefix="vera-sparse-scale-") as tmp:
        shards = {}
        for scope, scope_facts in facts.items():
            started = time.perf_counter()
            shards[scope] = lexical_ablation.new_shard(Path(tmp) / scope, "sparse")
            lexical_ablation.fill(shards[scope], "sparse", scope_facts, fields)
            report["fill_s"][scope] = round(time.perf_counter() - started, 2)
        del facts, fields
        legs = {
            f"shard per scope, prefetch {depth}": lexical_ablation.QdrantLexical(
                shards, None, lexical_ablation.query_terms, "sparse", CONTEXT_WEIGHT, depth
            )
            for depth in prefetches
        }
        now = dt.datetime.now(dt.UTC)
        pairs = list(zip(questions["small"], questions["large"], strict=False))[:QUESTIONS]
        names = ["memory BM25 (today)", *legs]
        first: dict[tuple[str, str], list[float]] = {(n, s): [] for n in names for s in projects}
        again: dict[tuple[str, str], list[float]] = {(n, s): [] for n in names for s in projects}
        share: dict[tuple[str, str], list[float]] = {(n, s): [] for n in legs for s in projects}
        worst_diff = dict.fromkeys(share, 0.0)
        for round_ in tqdm(range(rounds), desc="rounds", file=sys.stderr):
            into = first if round_ == 0 else again
            for texts in pairs:
                for scope, text in zip(projects, texts, strict=True):
                    query = IndexQuery(scope_ids=(scope,), as_of=now)
                    t0 = time.perf_counter()
                    expected = memory.search(text, query, POOL, context_weight=CONTEXT_WEIGHT)
                    into["memory BM25 (today)", scope].append(time.perf_counter() - t0)
                    for name, leg in legs.items():
                        t0 = time.perf_counter()
                        found = leg.search_sync(text, query, POOL)
                        into[name, scope].append(time.perf_counter() - t0)
                        if round_ == 0:
                            held, diff = _parity(found, expected)
                            share[name, scope].append(held)
                            worst_diff[name, scope] = max(worst_diff[name, scope], diff)
        for shard in shards.values():
            shard.close()
    rows = {}
    for name in names:
        row: dict[str, Any] = {}
        for scope in projects:
            row[f"{scope}_first_p50_ms"] = _p50_ms(first[name, scope])
            row[f"{scope}_again_p50_ms"] = _p50_ms(again[name, scope] or first[name, scope])
            if name in legs:
                row[f"{scope}_top{POOL}_share"] = round(statistics.mean(share[name, scope]), 3)
                row[f"{scope}_max_relative_score_difference"] = float(
                    f"{worst_diff[name, scope]:.2e}")
        for when in ("first", "again"):
            row[f"{when}_ratio"] = round(
                row[f"large_{when}_p50_ms"] / row[f"small_{when}_p50_ms"], 2)
        rows[name] = row
    report["questions"] = len(pairs)
    report["rows"] = rows
    return report


def figures(report: dict) -> dict:
    """The table the bench prints and keeps as its record (bench/record.py)."""
    small, large = report["facts"]["small"], report["facts"]["large"]
    rows = [[name, r["small_first_p50_ms"], r["large_first_p50_ms"], r["first_ratio"],
             r["small_again_p50_ms"], r["large_again_p50_ms"], r["again_ratio"],
             f"{r['small_top50_share']:.3f} / {r['large_top50_share']:.3f}"
             if "small_top50_share" in r else "",
             f"{r['small_max_relative_score_difference']:.1e} / "
             f"{r['large_max_relative_score_difference']:.1e}"
             if "small_top50_share" in r else ""]
            for name, r in report["rows"].items()]
    return record.table(
        ["lexical leg alone, p50 ms", f"{small:,} first", f"{large:,} first", "x",
         f"{small:,} again", f"{large:,} again", "x", "share of the memory's top 50",
         "max relative score difference"], rows,
        digits=[None, 2, 2, 1, 2, 2, 1, None, None],
        title=f"{report['questions']} questions per project, interleaved:")


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench sparse-scale",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=int, default=1000, help="the small project's facts")
    parser.add_argument("--large", type=int, default=100_000, help="the large project's facts")
    parser.add_argument("--prefetch", default="200,1000",
                        help="comma-separated prefetch depths per field (default 200,1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the questions")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    if not 0 < args.small < args.large:
        parser.error("--small and --large: 0 < SMALL < LARGE")
    prefetches = [int(x) for x in args.prefetch.split(",") if x.strip()]
    if not prefetches or min(prefetches) < POOL:
        parser.error(f"--prefetch: depths of at least {POOL} (the leg's pool)")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    wall = time.perf_counter()
    report = measure(args.small, args.large, prefetches, args.rounds, args.seed)
    table = figures(report)
    print("\n".join(record.as_markdown(table)))
    record.write("sparse-scale", argv, [table], wall_s=time.perf_counter() - wall)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
