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

Prints a table, writes ``bench-results/scale.json`` with the machine it ran on and the
bench's record (bench/records/scale.json, bench/record.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import record
from bench.harness import render_table, running_stack
from bench.record import machine_info
from bench.scale_corpus import SEED, generate, write_files
from bench.scale_measure import (
    FRESHNESS_PROBES,
    LIMIT,
    TOKEN_BUDGET,
    ask_interleaved,
    freshness,
    hnsw_on_disk,
    load_corpus,
    measure_queries,
    peak_memory,
    retrieval_start_s,
    wait_for_hnsw,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench-results" / "scale.json"
LOADED_MARKER = "loaded.json"  # in a --scale-keep directory: what it holds


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
         keep: Path | None = None, growth: tuple[int, int] | None = None,
         argv: list[str] | None = None) -> int:

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
    tables = [record.from_markdown(table), record.from_markdown(memory)] if results else []
    if growth_result:
        small_p, large_p = growth_result["facts"]
        tables.append(record.table(
            ["growth, one stack, get_context over MCP HTTP", f"{small_p} p50 ms",
             f"{large_p} p50 ms", "x"],
            [[when, growth_result[key]["http_ms"][small_p]["p50"],
              growth_result[key]["http_ms"][large_p]["p50"], growth_result[ratio]]
             for key, ratio, when in (
                 ("queries", "large_p50_over_small_p50", "first asked"),
                 ("asked_again", "asked_again_large_p50_over_small_p50", "asked again"))],
            digits=[None, 1, 1, 2]))
    record.write("scale", argv or [], tables, wall_s=total)
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
                hnsw_wait_s=args.scale_hnsw_wait, keep=args.scale_keep, growth=growth,
                argv=argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
