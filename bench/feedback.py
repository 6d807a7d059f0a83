"""The learned-ranking bench on LoCoMo: ``scripts/bench feedback``.

    scripts/bench feedback [--feedback-quick] [--feedback-curve 100,300,1000]
                           [--feedback-out PATH] [--data PATH] [--conversations N]
                           [--max-questions N]

Starts a stack with ``vera up`` in a temporary data dir (background fit off), ingests
every conversation with ``vera ingest`` (each into its own project) and splits the
conversations into two folds, balanced by question count. For each fold in turn, through
the official MCP client over HTTP:

1. asks every question of the evaluation fold with ``knowledge_get_context`` under the
   hand-set ranking;
2. asks the training fold's questions (shuffled, as feedback would arrive) with
   ``persist=true`` and records result-level feedback with ``knowledge_feedback`` the way
   a careful user does (issue 30): ``up`` on every result citing an evidence turn,
   ``down`` on those of the top three citing none;
3. for each point of the curve (the newest N of those rows) and for all of them, fits
   with ``vera.commands.rank.fit`` (what ``vera rank fit --all --max-rows N --since T`` runs,
   limited to this fold's feedback), asks the evaluation fold again, and turns the model
   off (``vera rank off``) so the next fit starts from the hand-set ranking.

Then the folds swap. Scores hit@k, recall@k and MRR@10 before and after, per fold, pooled
and per question category, with get_context p50/p95 of each pass; counts the feedback
rows the knowledge store holds next to the ones the tool reported created. Prints the
before/after table, the per-category table and the curve, and writes
``bench-results/feedback.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from bench import locomo, record
from bench.harness import (
    LIMIT,
    NO_BACKGROUND_FIT,
    ROOT,
    TOKEN_BUDGET,
    add_data_options,
    call_tool,
    ingest_all,
    pool_tallies,
    ranking_from,
    render_table,
    running_stack,
    two_folds,
    wait_until_retrieval_idle,
)
from bench.metrics import METRIC_NAMES, Tally
from bench.record import machine_info

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

DEFAULT_OUT = ROOT / "bench-results" / "feedback.json"
DEFAULT_CURVE = (100, 300, 1000)
SEED = 14  # the order the training questions are asked in
QUICK: dict[str, Any] = {"conversations": 2, "max_questions": 8, "curve": (10,)}


# --- folds and judgements ----------------------------------------------------------------


def ranked_results(payload: dict | None) -> list[dict]:
    """The pack's top LIMIT results, best first (the order bench/run.py, the locomo
    bench, scores)."""
    results = (payload or {}).get("results") or []
    return sorted(results, key=lambda r: r.get("rank") if r.get("rank") is not None else math.inf)[
        :LIMIT
    ]


# A careful user marks down only what they read first (and every helpful result).
DOWN_WITHIN = 3


def judgements(
    payload: dict | None, conv: locomo.Conversation, evidence: tuple[str, ...]
) -> list[tuple[str, str]]:
    """(result_ref, signal) of one pack's top LIMIT as a careful user leaves them: `up` on
    every result citing an evidence turn, `down` on the ones of the top DOWN_WITHIN that
    cite none, nothing on the rest. Below the top nearly every label is an `up`: the
    position bias learned_rank must not learn (its module docstring)."""
    results = ranked_results(payload)
    ranking = ranking_from({"results": results}, conv)
    wanted = set(evidence)
    signals = []
    for position, (result, cited) in enumerate(zip(results, ranking, strict=True), start=1):
        if wanted & set(cited):
            signals.append((result["result_ref"], "up"))
        elif position <= DOWN_WITHIN:
            signals.append((result["result_ref"], "down"))
    return signals


# --- MCP calls ---------------------------------------------------------------------------


async def get_context(
    client, conv: locomo.Conversation, question: str, errors: list[dict], *, persist: bool = False
) -> dict | None:
    return await call_tool(
        client,
        "knowledge_get_context",
        {
            "query": question,
            "project": conv.project,
            "limit": LIMIT,
            "token_budget": TOKEN_BUDGET,
            "persist": persist,
        },
        errors,
    )


async def evaluate(
    client, conversations: list[locomo.Conversation], errors: list[dict], label: str
) -> Tally:
    """Every question of ``conversations`` once through knowledge_get_context."""
    tally = Tally()
    total = sum(len(c.questions) for c in conversations)
    with tqdm(total=total, desc=label, unit="q", file=sys.stderr) as bar:
        for conv in conversations:
            for q in conv.questions:
                t0 = time.perf_counter()
                payload = await get_context(client, conv, q.question, errors)
                ms = (time.perf_counter() - t0) * 1000
                if payload is None:
                    tally.errors += 1
                tally.add(
                    ranking_from(payload, conv),
                    q.evidence,
                    locomo.CATEGORY_NAMES.get(q.category, str(q.category)),
                    ms,
                )
                bar.update(1)
    return tally


@dataclass
class Recorded:
    """What recording one training fold's feedback did."""

    questions_asked: int = 0
    rows_created: int = 0  # result-level feedback the tool reported created
    signals: Counter = field(default_factory=Counter)


async def record_feedback(
    client, order: list[tuple[locomo.Conversation, locomo.Question]], errors: list[dict]
) -> Recorded:
    """Asks each training question with persist=true and records its judgements through
    knowledge_feedback, question by question, as users would."""
    recorded = Recorded()
    with tqdm(total=len(order), desc="feedback", unit="q", file=sys.stderr) as bar:
        for conv, q in order:
            pack = await get_context(client, conv, q.question, errors, persist=True)
            recorded.questions_asked += 1
            signals = judgements(pack, conv, q.evidence) if pack else []
            pack_id = pack["pack_id"] if pack else None
            for ref, signal in signals:
                stored = await call_tool(
                    client,
                    "knowledge_feedback",
                    {"context_pack_id": pack_id, "result_ref": ref, "signal": signal},
                    errors,
                )
                if stored is not None and stored["created"] and stored["level"] == "result":
                    recorded.rows_created += 1
                    recorded.signals[signal] += 1
            bar.update(1)
    return recorded


# --- the stack ---------------------------------------------------------------------------


async def stored_feedback(data_dir: Path, since: dt.datetime) -> dict[str, int]:
    """Result-level feedback rows the knowledge store holds from ``since`` on, by signal
    (read next to the stack, the way an operator would check)."""
    import asyncpg

    from bench.harness import dsn_of_stack

    stack_pid = int(json.loads((data_dir / "run" / "stack.json").read_text())["pid"])
    conn = await asyncpg.connect(dsn_of_stack(stack_pid))
    try:
        rows = await conn.fetch(
            "SELECT signal, count(*) AS n FROM knowledge.retrieval_feedback "
            "WHERE result_ref <> pack_id AND recorded_at >= $1 GROUP BY signal",
            since,
        )
    finally:
        await conn.close()
    return {r["signal"]: int(r["n"]) for r in rows}


def _summary(tally: Tally) -> dict:
    return {**tally.summary(), "errors": tally.errors}


async def run_folds(
    stack: LaunchedStack, data_dir: Path, folds: list[tuple[list, list]], curve: tuple[int, ...]
) -> list[dict]:
    """Each (train, evaluate) fold in turn on one stack: hand-set pass, feedback, a fit
    and a pass per curve point, then the hand-set pass again. Every fit is limited to the
    feedback its own fold recorded (``since``) and turned off after its pass, so the next
    point (and the next fold) starts from the hand-set ranking; the last pass shows the
    rollback restores it exactly and brackets the timed passes against the box's load."""

    from vera.commands import rank
    from vera.config import load_settings
    from vera.stack.run_files import stack_client_settings

    settings = stack_client_settings(load_settings(), data_dir)
    results = []
    async with stack.mcp_client() as client:
        errors: list[dict] = []
        await get_context(client, folds[0][1][0], "warm up", errors)  # one-off costs
        for number, (train, evaluate_on) in enumerate(folds, start=1):
            errors = []
            before = await evaluate(client, evaluate_on, errors, f"fold {number} hand-set")
            order = [(c, q) for c in train for q in c.questions]
            random.Random(SEED).shuffle(order)
            since = dt.datetime.now(dt.UTC)
            recorded = await record_feedback(client, order, errors)
            points = []
            for max_rows in (*(n for n in curve if n < recorded.rows_created), 0):
                t0 = time.perf_counter()
                fit = await rank.fit(settings, project=None, max_rows=max_rows, since=since)
                fit_s = time.perf_counter() - t0
                label = f"fold {number} after {max_rows or recorded.rows_created} rows"
                after = await evaluate(client, evaluate_on, errors, label)
                if fit["activated"]:
                    await rank.off(settings, project=None)
                points.append(
                    {
                        "rows": max_rows or recorded.rows_created,
                        "all": not max_rows,
                        "fit": fit,
                        "fit_s": fit_s,
                        "summary": _summary(after),
                        "by_category": after.by_category(),
                        "tally": after,
                    }
                )
            again = await evaluate(client, evaluate_on, errors, f"fold {number} hand-set again")
            results.append(
                {
                    "fold": number,
                    "train": [c.sample_id for c in train],
                    "evaluate": [c.sample_id for c in evaluate_on],
                    "since": since.isoformat(),
                    "before": before,
                    "points": points,
                    "again": again,
                    "rollback_identical": again.scores == before.scores,
                    "errors": errors,
                    "feedback": {
                        "questions_asked": recorded.questions_asked,
                        "rows_created": recorded.rows_created,
                        "signals": dict(recorded.signals),
                        "stored": await stored_feedback(data_dir, since),
                    },
                }
            )
    return results


def run_stack(
    conversations: list,
    folds: list[tuple[list, list]],
    curve: tuple[int, ...],
    *,
    settle: bool,
    ingest_deadline: float,
) -> tuple[list[dict], dict, list[dict]]:
    """Starts a stack, ingests every conversation, runs the folds; (folds, timings,
    ingest failures)."""
    timings: dict[str, Any] = {}
    ingest_failures: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="vera-bench-feedback-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        # The background fit stays off: every model this bench measures is one it fitted.
        with running_stack(root, **NO_BACKGROUND_FIT) as (stack, data_dir, env):
            timings["stack_start_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            ingest_all(conversations, root, data_dir, env, ingest_failures, ingest_deadline)
            timings["ingest_s"] = time.perf_counter() - t0
            if settle:
                timings["index_settle_s"] = wait_until_retrieval_idle(data_dir)
            t0 = time.perf_counter()
            results = asyncio.run(run_folds(stack, data_dir, folds, curve))
            timings["questions_s"] = time.perf_counter() - t0
    return results, timings, ingest_failures


# --- report ------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _model(fit: dict) -> str:
    """What served the pass after a fit: the model, or the hand-set ranking and why."""
    return "learned" if fit["activated"] else f"hand-set ({fit['outcome']})"


def _row(name: str, ranking: str, s: dict) -> list[str]:
    return [
        name,
        ranking,
        *(_f(s[m]) for m in METRIC_NAMES),
        _f(s.get("p50_ms"), 1),
        _f(s.get("p95_ms"), 1),
        str(s["questions"]),
    ]


def format_table(folds: list[dict]) -> str:
    """Per fold and pooled over both evaluation folds: the hand-set pass, the pass after
    the fit on all the fold's feedback, the hand-set pass again after `rank off`, and the
    change. Quality changes against the first hand-set pass (the second one is identical
    when the rollback works); latency against the mean of the two hand-set passes, which
    bracket the pass after the fit in time, so a change in the box's load shows."""
    header = ["evaluation", "ranking", *METRIC_NAMES, "p50 ms", "p95 ms", "n"]
    rows = [header]
    groups = [
        (
            f"fold {f['fold']} ({'+'.join(f['evaluate'])})",
            f["before"],
            f["points"][-1]["tally"],
            f["again"],
            _model(f["points"][-1]["fit"]),
        )
        for f in folds
    ]
    learned = sum(f["points"][-1]["fit"]["activated"] for f in folds)
    groups.append(
        (
            "both folds",
            pool_tallies([f["before"] for f in folds]),
            pool_tallies([f["points"][-1]["tally"] for f in folds]),
            pool_tallies([f["again"] for f in folds]),
            f"after fit ({learned}/{len(folds)} learned)",
        )
    )
    for name, before, after, again, after_label in groups:
        b, a, h = before.summary(), after.summary(), again.summary()
        rows.append(_row(name, "hand-set", b))
        rows.append(_row("", after_label, a))
        rows.append(_row("", "hand-set again (rank off)", h))
        latency = [
            _f(a.get(k, math.nan) - (b.get(k, math.nan) + h.get(k, math.nan)) / 2, 1, True)
            for k in ("p50_ms", "p95_ms")
        ]
        rows.append(
            ["", "change", *(_f(a[m] - b[m], sign=True) for m in METRIC_NAMES), *latency, ""]
        )
    return render_table(rows)


def format_category_table(folds: list[dict]) -> str:
    before = pool_tallies([f["before"] for f in folds]).by_category()
    after = pool_tallies([f["points"][-1]["tally"] for f in folds]).by_category()
    header = [
        "category",
        "hand-set hit@5",
        "after hit@5",
        "change hit@5",
        "change recall@10",
        "change mrr@10",
        "n",
    ]
    rows = [header]
    for category in sorted(before):
        b, a = before[category], after[category]
        rows.append(
            [
                category,
                _f(b["hit@5"]),
                _f(a["hit@5"]),
                _f(a["hit@5"] - b["hit@5"], sign=True),
                _f(a["recall@10"] - b["recall@10"], sign=True),
                _f(a["mrr@10"] - b["mrr@10"], sign=True),
                str(b["questions"]),
            ]
        )
    return render_table(rows)


def format_curve(folds: list[dict]) -> str:
    """Gain on the evaluation fold against the feedback rows the model was fitted on."""
    header = [
        "feedback rows",
        "fold",
        "ranking",
        "hit@5",
        "change hit@5",
        "change recall@10",
        "change mrr@10",
        "p50 ms",
    ]
    rows = [header]
    for f in folds:
        b = f["before"].summary()
        for point in f["points"]:
            a = point["summary"]
            rows.append(
                [
                    f"{point['rows']}{' (all)' if point['all'] else ''}",
                    str(f["fold"]),
                    _model(point["fit"]),
                    _f(a["hit@5"]),
                    _f(a["hit@5"] - b["hit@5"], sign=True),
                    _f(a["recall@10"] - b["recall@10"], sign=True),
                    _f(a["mrr@10"] - b["mrr@10"], sign=True),
                    _f(a.get("p50_ms"), 1),
                ]
            )
    return render_table(rows)


def _json_fold(fold: dict) -> dict:
    out = {k: v for k, v in fold.items() if k not in ("before", "points", "again")}
    out["before"] = {
        "summary": _summary(fold["before"]),
        "by_category": fold["before"].by_category(),
    }
    out["again"] = {"summary": _summary(fold["again"])}
    out["points"] = [{k: v for k, v in p.items() if k != "tally"} for p in fold["points"]]
    return out


def _versus(fit: dict, figure: str, digits: int) -> str:
    """"model vs hand-set" on one figure, or "-" for a fit refused before it replayed a
    query (too little or one-sided feedback)."""
    model, hand = fit[f"model_{figure}"], fit[f"hand_{figure}"]
    if not fit["replayed_queries"] or model is None or hand is None:
        return "-"
    return f"{model:.{digits}f} vs {hand:.{digits}f}"


def fit_table(folds: list[dict]) -> dict:
    """What each fit decided, as it judged itself: its own feedback's queries replayed out
    of fold through the serving path, model against hand-set (the figures ``vera rank
    status`` shows)."""
    rows = []
    for fold in folds:
        for point in fold["points"]:
            fit = point["fit"]
            rows.append([
                fold["fold"],
                f"{fit['training_rows']}{' (all)' if point['all'] else ''}",
                f"`{fit['outcome']}`",
                fit["replayed_queries"],
                _versus(fit, "hit", 3),
                _versus(fit, "recall", 3),
                _versus(fit, "figure", 4),
                point["fit_s"],
            ])
    return record.table(
        ["fold", "rows", "outcome", "queries replayed", "hit@5", "recall@10", "MRR@10",
         "fit s"], rows, digits=[None] * 7 + [1],
        title="What each fit decided, replayed on the fold's own feedback queries out of fold "
        "through the serving path (top 10 scored on the `up` labels), model vs hand-set:")


# --- entry point -------------------------------------------------------------------------


def main(
    data: Path,
    out: Path,
    *,
    conversations: int,
    max_questions: int,
    curve: tuple[int, ...],
    settle: bool,
    ingest_deadline: float,
) -> dict:
    wall = time.perf_counter()
    loaded = locomo.load(data)
    if conversations:
        loaded = loaded[:conversations]
    if max_questions:
        loaded = [
            locomo.Conversation(
                c.sample_id,
                c.turns,
                c.questions[:max_questions],
                c.skipped_adversarial,
                c.skipped_no_evidence,
                c.dropped_evidence,
            )
            for c in loaded
        ]
    first, second = two_folds(loaded)
    print(
        f"LoCoMo: {len(loaded)} conversations, fold 1 {[c.sample_id for c in first]}, "
        f"fold 2 {[c.sample_id for c in second]}",
        file=sys.stderr,
    )
    folds, timings, ingest_failures = run_stack(
        loaded,
        [(second, first), (first, second)],
        curve,
        settle=settle,
        ingest_deadline=ingest_deadline,
    )
    table, categories, curve_table = (
        format_table(folds),
        format_category_table(folds),
        format_curve(folds),
    )
    now = dt.datetime.now(dt.UTC)
    machine = machine_info()
    print()
    print(
        f"LoCoMo dev, learned ranking from feedback, {now:%Y-%m-%d}, "
        f"{machine['cpu_count']} CPUs ({machine.get('cpu_model', machine['machine'])}), "
        f"Python {machine['python']}; each fold evaluated by a model fitted on the other"
    )
    print(table)
    print("\nper category (both evaluation folds)")
    print(categories)
    print("\ngain against feedback rows")
    print(curve_table)
    for fold in folds:
        fb = fold["feedback"]
        print(
            f"fold {fold['fold']}: {fb['questions_asked']} training questions, "
            f"{fb['rows_created']} feedback rows created through knowledge_feedback "
            f"({fb['signals']}), stored {fb['stored']}; hand-set again after rank off "
            f"{'identical' if fold['rollback_identical'] else 'DIFFERENT'}",
            file=sys.stderr,
        )
        if fold["errors"]:
            print(
                f"WARNING: fold {fold['fold']}: {len(fold['errors'])} MCP calls failed",
                file=sys.stderr,
            )
    total = time.perf_counter() - wall
    print(f"\nwall time {total:.1f} s", file=sys.stderr)
    report = {
        "bench": "locomo-dev learned ranking from feedback",
        "date": now.isoformat(timespec="seconds"),
        "machine": machine,
        "settings": {
            "limit": LIMIT,
            "token_budget": TOKEN_BUDGET,
            "judged": f"up on every evidence result of the top {LIMIT}, "
            f"down on the others of the top {DOWN_WITHIN}",
            "seed": SEED,
            "curve": list(curve),
            "conversations": len(loaded),
            "max_questions": max_questions or None,
            "settle": settle,
            "quota_enabled": False,
        },
        "folds": [_json_fold(f) for f in folds],
        "timings": timings,
        "ingest_failures": ingest_failures,
        "table": table,
        "category_table": categories,
        "curve_table": curve_table,
        "wall_s": total,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return report


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench feedback", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--feedback-out", "--out", dest="out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--feedback-quick",
        action="store_true",
        help=f"a smoke run: {QUICK['conversations']} conversations, "
        f"{QUICK['max_questions']} questions each, one curve point, "
        "no wait for the index to settle",
    )
    parser.add_argument(
        "--feedback-curve",
        default=",".join(map(str, DEFAULT_CURVE)),
        help="feedback row counts to fit and evaluate at before 'all'",
    )
    add_data_options(parser)
    args = parser.parse_args(argv)
    curve = tuple(int(x) for x in args.feedback_curve.split(",") if x.strip())
    if args.feedback_quick:
        report = main(
            args.data,
            args.out,
            conversations=args.conversations or QUICK["conversations"],
            max_questions=args.max_questions or QUICK["max_questions"],
            curve=QUICK["curve"],
            settle=False,
            ingest_deadline=args.ingest_deadline,
        )
    else:
        report = main(
            args.data,
            args.out,
            conversations=args.conversations,
            max_questions=args.max_questions,
            curve=curve,
            settle=True,
            ingest_deadline=args.ingest_deadline,
        )
    record.write("feedback", argv, [record.from_markdown(report["table"]),
                                    record.from_markdown(report["curve_table"]),
                                    fit_table(report["folds"])],
                 wall_s=report["wall_s"])
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
