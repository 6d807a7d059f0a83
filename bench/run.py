"""The LoCoMo retrieval-quality bench: VERA (through MCP) next to BM25 and dense baselines.

    scripts/bench locomo [--only-baselines] [--no-ablation] [--out PATH] [--data PATH]
                         [--max-questions N]

Loads ``shared/data/locomo/locomo-dev.json``, turns every turn into one fact (see
bench/locomo.py), starts a stack with ``vera up`` in a temporary data dir, ingests each
conversation with ``vera ingest`` into its own project, asks every scored question through
the real MCP client (``knowledge_search`` and ``knowledge_get_context``, limit 10), and
scores the answers next to Okapi BM25 and dense-only MiniLM computed on the same turns in
the same run. Prints a table and a per-category table, writes a JSON report and the bench's record
(bench/records/locomo.json, bench/record.py).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from bench import locomo, record
from bench.harness import (
    DEFAULT_DATA,
    INGEST_DEADLINE_SECONDS,
    LIMIT,
    ROOT,
    TOKEN_BUDGET,
    ingest_all,
    ranking_from,
    render_table,
    running_stack,
    timed_call,
    wait_until_retrieval_idle,
)
from bench.metrics import METRIC_NAMES, Tally
from bench.record import machine_info

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

DEFAULT_OUT = ROOT / "bench-results" / "locomo.json"
SYSTEMS = ("VERA search", "VERA get_context", "BM25", "dense MiniLM")
DENSE_TEXT_CHOICES = ("fact", "turn")
KEPT = (*METRIC_NAMES, "p50_ms", "p95_ms")


def record_of(report: dict) -> dict:
    """What docs/benchmarks.md shows of a report (bench/record.py): the figures per system
    and per in-process configuration, not the per-question detail."""
    ablation = report.get("ablation") or {}
    return {
        "bench": "locomo",
        "command": report["command"],
        "date": report["date"],
        "machine": {k: report["machine"].get(k) for k in record.MACHINE_KEYS},
        "dataset": {k: report["dataset"][k] for k in ("conversations", "scored_questions")},
        "wall_s": report["timings"]["wall_s"],
        "summary": {name: {k: v for k, v in s.items() if k in KEPT}
                    for name, s in report["summary"].items()},
        "ablation": None if not ablation else {
            "embedder": ablation["embedder"],
            "in_process_p50_ms": ablation["in_process_ms"]["p50"],
            "embed_p50_ms": ablation["embed_ms"]["p50"],
            "configs": {name: {k: v for k, v in row.items() if k in KEPT}
                        for name, row in ablation["configs"].items()},
            "fusion_chosen": (ablation.get("fusion") or {}).get("chosen", {}),
        },
    }


# --- baselines ---------------------------------------------------------------------------


def _doc_text(turn: locomo.Turn, mode: str) -> str:
    return turn.fact_text if mode == "fact" else turn.text


def run_baselines(conversations: list[locomo.Conversation], tallies: dict[str, Tally],
                  per_question: dict[tuple[str, int], dict], *, dense_text: str,
                  bm25_text: str, skip_dense: bool) -> dict[str, float]:
    from bench.bm25 import BM25

    timings: dict[str, float] = {}
    started = time.perf_counter()
    model = None
    if not skip_dense:
        from bench.dense import DenseIndex, MiniLM

        model = MiniLM()
        timings["dense_model_load_s"] = time.perf_counter() - started
    index_s = {"bm25": 0.0, "dense": 0.0}
    total = sum(len(c.questions) for c in conversations)
    with tqdm(total=total, desc="baselines", unit="q", file=sys.stderr) as bar:
        for conv in conversations:
            t0 = time.perf_counter()
            bm25 = BM25([_doc_text(t, bm25_text) for t in conv.turns])
            index_s["bm25"] += time.perf_counter() - t0
            dense = None
            if model is not None:
                t0 = time.perf_counter()
                dense = DenseIndex(model, [_doc_text(t, dense_text) for t in conv.turns])
                index_s["dense"] += time.perf_counter() - t0
            for q in conv.questions:
                category = locomo.CATEGORY_NAMES.get(q.category, str(q.category))
                record = per_question[(q.sample_id, q.index)]
                t0 = time.perf_counter()
                hits = bm25.search(q.question, LIMIT)
                ms = (time.perf_counter() - t0) * 1000
                ranking = [[conv.turns[i].dia_id] for i, _ in hits]
                record["BM25"] = _question_record(
                    tallies["BM25"].add(ranking, q.evidence, category, ms), ranking)
                if dense is not None:
                    t0 = time.perf_counter()
                    hits = dense.search(q.question, LIMIT)
                    ms = (time.perf_counter() - t0) * 1000
                    ranking = [[conv.turns[i].dia_id] for i, _ in hits]
                    record["dense MiniLM"] = _question_record(
                        tallies["dense MiniLM"].add(ranking, q.evidence, category, ms), ranking)
                bar.update(1)
    timings["bm25_index_s"] = index_s["bm25"]
    if model is not None:
        timings["dense_index_s"] = index_s["dense"]
    timings["baselines_total_s"] = time.perf_counter() - started
    return timings


def _question_record(score: dict[str, float], ranking: list) -> dict:
    return {"hit@10": score["hit@10"], "rr": score["mrr@10"],
            "top": [sorted(r) for r in ranking]}


# --- the stack ---------------------------------------------------------------------------


async def ask_vera(stack: LaunchedStack, conversations: list[locomo.Conversation],
                   tallies: dict[str, Tally], per_question: dict[tuple[str, int], dict],
                   errors: list[dict]) -> None:

    tools = {
        "VERA search": ("knowledge_search", {}),
        "VERA get_context": ("knowledge_get_context", {"token_budget": TOKEN_BUDGET}),
    }
    total = sum(len(c.questions) for c in conversations)
    async with stack.mcp_client() as client:
        for tool, extra in tools.values():  # warm-up: the first call pays one-off costs
            await client.call_tool(tool, {"query": "warm up", "limit": LIMIT,
                                          "project": conversations[0].project, **extra})
        with tqdm(total=total, desc="VERA via MCP", unit="q", file=sys.stderr) as bar:
            for conv in conversations:
                for q in conv.questions:
                    category = locomo.CATEGORY_NAMES.get(q.category, str(q.category))
                    for system, (tool, extra) in tools.items():
                        args = {"query": q.question, "project": conv.project, "limit": LIMIT,
                                **extra}
                        payload, ms = await timed_call(client, tool, args, errors,
                                                       system=system, question=q.question)
                        tallies[system].errors += payload is None
                        ranking = ranking_from(payload, conv)
                        score = tallies[system].add(ranking, q.evidence, category, ms)
                        per_question[(q.sample_id, q.index)][system] = _question_record(
                            score, ranking)
                    bar.update(1)


# --- report ------------------------------------------------------------------------------


def _fmt(value, ms: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.1f}" if ms else f"{value:.3f}"


def format_table(summaries: dict[str, dict]) -> str:
    header = ["system", *METRIC_NAMES, "p50 ms", "p95 ms", "n"]
    rows = [header]
    for system, s in summaries.items():
        rows.append([system, *(_fmt(s.get(m)) for m in METRIC_NAMES),
                     _fmt(s.get("p50_ms"), True), _fmt(s.get("p95_ms"), True),
                     str(s.get("questions", 0))])
    return render_table(rows)


def format_category_table(by_category: dict[str, dict[str, dict]]) -> str:
    header = ["category", "system", *METRIC_NAMES, "n"]
    rows = [header]
    categories = sorted({c for per in by_category.values() for c in per})
    for category in categories:
        for system, per in by_category.items():
            s = per.get(category)
            if s:
                rows.append([category, system, *(_fmt(s.get(m)) for m in METRIC_NAMES),
                             str(s["questions"])])
    return render_table(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench locomo", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON file")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    parser.add_argument("--only-baselines", action="store_true",
                        help="skip the stack: BM25 and dense only")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense baseline")
    parser.add_argument("--dense-text", choices=DENSE_TEXT_CHOICES, default="fact",
                        help="dense baseline documents: 'fact' = \"speaker said text\" "
                             "(subject predicate object, default) or 'turn' = the text")
    parser.add_argument("--bm25-text", choices=DENSE_TEXT_CHOICES, default="fact",
                        help="BM25 documents, as --dense-text")
    parser.add_argument("--ingest-deadline", type=float, default=INGEST_DEADLINE_SECONDS,
                        help="per-call deadline (s) of `vera ingest` (its default is 10)")
    parser.add_argument("--no-ablation", action="store_true",
                        help="skip the in-process ablation of the ranking stages")
    parser.add_argument("--max-questions", type=int, default=0,
                        help="score only the first N questions of each conversation (smoke)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    wall = time.perf_counter()
    conversations = locomo.load(args.data)
    if args.max_questions:
        conversations = [
            locomo.Conversation(c.sample_id, c.turns, c.questions[: args.max_questions],
                                c.skipped_adversarial, c.skipped_no_evidence,
                                c.dropped_evidence)
            for c in conversations]
    dataset = {
        "file": str(args.data),
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "scored_questions": sum(len(c.questions) for c in conversations),
        "skipped_adversarial": sum(c.skipped_adversarial for c in conversations),
        "skipped_no_evidence": sum(c.skipped_no_evidence for c in conversations),
        "dropped_evidence_ids": {c.sample_id: list(c.dropped_evidence)
                                 for c in conversations if c.dropped_evidence},
    }
    print(f"LoCoMo: {dataset['conversations']} conversations, {dataset['turns']} turns, "
          f"{dataset['scored_questions']} scored questions "
          f"({dataset['skipped_adversarial']} adversarial and "
          f"{dataset['skipped_no_evidence']} without evidence left out)", file=sys.stderr)

    systems: tuple[str, ...] = SYSTEMS[2:] if args.only_baselines else SYSTEMS
    if args.no_dense:
        systems = tuple(s for s in systems if s != "dense MiniLM")
    tallies = {name: Tally() for name in systems}
    per_question: dict[tuple[str, int], dict] = {
        (q.sample_id, q.index): {"sample_id": q.sample_id, "qa_index": q.index,
                                 "category": q.category, "question": q.question,
                                 "evidence": list(q.evidence)}
        for c in conversations for q in c.questions}
    timings: dict[str, float | dict] = {}
    errors: list[dict] = []
    ingest_failures: list[dict] = []

    if not args.only_baselines:
        with tempfile.TemporaryDirectory(prefix="vera-bench-") as tmp:
            root = Path(tmp)
            t0 = time.perf_counter()
            with running_stack(root) as (stack, data_dir, env):
                timings["stack_start_s"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                timings["ingest_s"] = ingest_all(conversations, root, data_dir, env,
                                                 ingest_failures, args.ingest_deadline)
                timings["ingest_total_s"] = time.perf_counter() - t0
                timings["index_settle_s"] = wait_until_retrieval_idle(data_dir)
                t0 = time.perf_counter()
                asyncio.run(ask_vera(stack, conversations, tallies, per_question, errors))
                timings["vera_questions_s"] = time.perf_counter() - t0

    timings.update(run_baselines(
        conversations, tallies, per_question, dense_text=args.dense_text,
        bm25_text=args.bm25_text, skip_dense="dense MiniLM" not in tallies))
    ablation = None
    if not args.no_ablation:
        from bench import ablation as ablation_mod

        ablation = ablation_mod.main_sync(conversations)
        timings["ablation_s"] = ablation["timings"]["total_s"]
    timings["wall_s"] = time.perf_counter() - wall

    summaries = {name: {**t.summary(), "errors": t.errors} for name, t in tallies.items()}
    by_category = {name: t.by_category() for name, t in tallies.items()}
    table = format_table(summaries)
    category_table = format_category_table(by_category)
    now = dt.datetime.now(dt.UTC)
    machine = machine_info()
    print()
    print(f"LoCoMo dev retrieval, {now:%Y-%m-%d}, {machine['cpu_count']} CPUs "
          f"({machine.get('cpu_model', machine['machine'])}), Python {machine['python']}")
    print(table)
    print()
    print("per category")
    print(category_table)
    ablation_table = ""
    if ablation is not None:
        ablation_table = format_table(
            {name: {k: v for k, v in r.items() if k not in ("p50_ms", "p95_ms")}
             for name, r in ablation["configs"].items()})
        print()
        print(f"ablation (in process, embedder {ablation['embedder']}; full pipeline "
              f"p50 {ablation['in_process_ms']['p50']:.1f} ms, one query embedding p50 "
              f"{ablation['embed_ms']['p50']:.1f} ms)")
        print(ablation_table)
        if "VERA get_context" in summaries:
            mcp = summaries["VERA get_context"].get("p50_ms")
            print(f"get_context over MCP p50 / in-process p50 = "
                  f"{mcp / ablation['in_process_ms']['p50']:.2f}")
    print(f"\nwall time {timings['wall_s']:.1f} s", file=sys.stderr)
    if ingest_failures:
        print(f"WARNING: {len(ingest_failures)} vera ingest attempts failed and were retried "
              "(see ingest_failures in the JSON)", file=sys.stderr)
    for name, t in tallies.items():
        if t.errors:
            print(f"WARNING: {name}: {t.errors} calls returned an MCP error", file=sys.stderr)

    report = {
        "bench": "locomo-dev retrieval",
        # What reproduces this run (scripts/gen-bench-docs prints it on the page).
        "command": " ".join(["scripts/bench", "locomo", *argv]),
        "date": now.isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {"limit": LIMIT, "token_budget": TOKEN_BUDGET, "bm25": {"k1": 1.2,
                     "b": 0.75, "stopwords": "english (classic list)", "stemmer": "snowball "
                     "english", "text": args.bm25_text}, "dense": {"model": "all-MiniLM-L6-v2",
                     "pooling": "mean", "normalized": True, "text": args.dense_text},
                     "max_questions": args.max_questions or None,
                     "ingest_deadline_s": args.ingest_deadline, "quota_enabled": False},
        "dataset": dataset,
        "summary": summaries,
        "by_category": by_category,
        "timings": timings,
        "errors": errors,
        "ingest_failures": ingest_failures,
        "table": table,
        "ablation": ablation,
        "ablation_table": ablation_table,
        "category_table": category_table,
        "questions": list(per_question.values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out} and {record.save('locomo', record_of(report))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
