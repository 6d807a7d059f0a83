"""What a learned ranking can reach with today's signals: ``scripts/bench rank-ablation``.

    scripts/bench rank-ablation [--data PATH] [--conversations N] [--max-questions N]
                        [--ablation-out PATH] [--dump PATH | --from-dump PATH]

Starts a stack with ``vera up`` in a temporary data dir (background fit off), ingests every
conversation with ``vera ingest`` and asks every question once through the official MCP
client with ``knowledge_get_context`` limit 30: the short list the pipeline re-reads at
limit 10, which is what the serving learned stage reorders. Keeps each result's rank,
signal vector and cited turns; ``--dump PATH`` writes them, ``--from-dump PATH`` starts
from such a file instead of a stack.

Then, offline, on bench/feedback.py's two folds of conversations: each model is fitted on
one fold's labels (a result is ``up`` when it cites an evidence turn, as
``feedback.judgements``), reorders the other fold's top 30, and the top 10 are scored with
bench/metrics.py, pooled over both evaluation folds. The rows:

- hand-set: the pipeline's own order;
- the serving model: ``learned_rank.fit`` itself on feedback rows of the training fold's
  top 10 (what ``scripts/bench feedback`` records) or top 30, scored by its
  ``LinearRanker``, with the activation rule's verdict on it;
- learned_rank's pairwise trainer over wider features: the serving ones plus
  pack-relative ones (each result's reciprocal rank in its own pack by each score, its
  gap to the pack's best, the rerank stage's MaxSim), then plus neighbour ones (other
  results from the same session within a few turns: read from LoCoMo's locator
  ``D<session>:<turn>``, so they exist in this bench only);
- gradient-boosted trees, pointwise, over all of those features;
- the ceiling: the best order of the top 30 an oracle knowing the evidence could pick.

Prints the table and writes ``bench-results/rank_ablation.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from bench import locomo, record
from bench.harness import (
    DEFAULT_DATA,
    INGEST_DEADLINE_SECONDS,
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

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack
from bench.metrics import METRIC_NAMES, Tally
from bench.record import machine_info
from vera.services.retrieval.domain import Fact, Result
from vera.services.retrieval.models.rerankers import STATIC_LATE_INTERACTION_WEIGHT
from vera.services.retrieval.rank import learned as learned_rank

DEFAULT_OUT = ROOT / "bench-results" / "rank_ablation.json"
# The pipeline re-reads max(REREAD_MIN, 2 * limit) = 30 facts at the bench's limit 10, and
# the learned stage reorders those: asking for 30 returns that whole pool.
DEPTH = 30
SEED = 14
PACK_RELATIVE = ("dense", "lexical", "fused", "dense_context", "rerank")
NEIGHBOUR_TURNS = 2  # a neighbour: same session, at most this many turns away
GBDT = {
    "max_iter": 100,
    "learning_rate": 0.05,
    "max_depth": 3,
    "early_stopping": False,
    "random_state": SEED,
}

Pack = Sequence[dict]  # one question's results, best (hand-set) first
Scorer = Callable[[Pack], Sequence[float]]
Featurizer = Callable[[Pack], Any]


# --- asking the stack --------------------------------------------------------------------


def question_record(conv: locomo.Conversation, q: locomo.Question, payload: dict | None) -> dict:
    """One question's top DEPTH results as the offline part reads them."""
    results = sorted(
        (payload or {}).get("results") or [],
        key=lambda r: r.get("rank") if r.get("rank") is not None else math.inf,
    )[:DEPTH]
    cited = ranking_from({"results": results}, conv, limit=DEPTH)
    return {
        "conversation": conv.sample_id,
        "index": q.index,
        "category": locomo.CATEGORY_NAMES.get(q.category, str(q.category)),
        "evidence": list(q.evidence),
        "error": payload is None,
        "results": [
            {
                "rank": r["rank"],
                "result_ref": r["result_ref"],
                "signals": r.get("signals") or {},
                "cited": c,
            }
            for r, c in zip(results, cited, strict=True)
        ],
    }


async def ask_all(
    stack: LaunchedStack, conversations: list[locomo.Conversation], errors: list[dict]
) -> list[dict]:

    def arguments(conv: locomo.Conversation, query: str) -> dict:
        return {
            "query": query,
            "project": conv.project,
            "limit": DEPTH,
            "token_budget": TOKEN_BUDGET,
        }

    questions = []
    total = sum(len(c.questions) for c in conversations)
    async with stack.mcp_client() as client:
        warm_up = arguments(conversations[0], "warm up")  # one-off costs
        await call_tool(client, "knowledge_get_context", warm_up, errors)
        with tqdm(total=total, desc="get_context top 30", unit="q", file=sys.stderr) as bar:
            for conv in conversations:
                for q in conv.questions:
                    payload = await call_tool(
                        client, "knowledge_get_context", arguments(conv, q.question), errors
                    )
                    questions.append(question_record(conv, q, payload))
                    bar.update(1)
    return questions


def collect(
    conversations: list[locomo.Conversation], ingest_deadline: float
) -> tuple[list[dict], dict, list[dict], list[dict]]:
    """Starts a stack, ingests, asks every question once; (questions, timings, ingest
    failures, MCP errors)."""
    timings: dict[str, float] = {}
    ingest_failures: list[dict] = []
    errors: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="vera-bench-rank-ablation-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        # The hand-set ranking must answer: no model may be fitted in the background.
        with running_stack(root, **NO_BACKGROUND_FIT) as (stack, data_dir, env):
            timings["stack_start_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            ingest_all(conversations, root, data_dir, env, ingest_failures, ingest_deadline)
            timings["ingest_s"] = time.perf_counter() - t0
            timings["index_settle_s"] = wait_until_retrieval_idle(data_dir)
            t0 = time.perf_counter()
            questions = asyncio.run(ask_all(stack, conversations, errors))
            timings["questions_s"] = time.perf_counter() - t0
    return questions, timings, ingest_failures, errors


# --- features ----------------------------------------------------------------------------


def is_up(result: dict, evidence: Sequence[str]) -> bool:
    return bool(set(evidence) & set(result["cited"]))


def serving_features(pack: Pack) -> Any:
    """learned_rank's own FEATURES, per result."""
    rows = [learned_rank.features(r["signals"]) for r in pack]
    return np.array(rows, dtype=float).reshape(len(pack), len(learned_rank.FEATURES))


def _filled(pack: Pack, name: str) -> list[float]:
    """Each result's ``name`` score; one the pipeline did not compute (rerank beyond its
    short list) counts as the pack's lowest."""
    present = [r["signals"][name] for r in pack if name in r["signals"]]
    floor = min(present, default=0.0)
    return [float(r["signals"].get(name, floor)) for r in pack]


def pack_relative_features(pack: Pack) -> Any:
    """The serving features plus, per result, how it compares with the rest of its own
    pack: MaxSim (the rerank stage's late-interaction term, zero where it did not run),
    and for each of PACK_RELATIVE its reciprocal rank by that score and its gap to the
    pack's best."""
    columns = [
        [
            (r["signals"]["rerank"] - r["signals"].get("fused", 0.0))
            / STATIC_LATE_INTERACTION_WEIGHT
            if "rerank" in r["signals"]
            else 0.0
            for r in pack
        ]
    ]
    for name in PACK_RELATIVE:
        values = _filled(pack, name)
        order = sorted(range(len(pack)), key=lambda i: (-values[i], i))
        inverse_rank = [0.0] * len(pack)
        for position, i in enumerate(order, start=1):
            inverse_rank[i] = 1.0 / position
        best = max(values, default=0.0)
        columns += [inverse_rank, [v - best for v in values]]
    extra = np.array(columns, dtype=float).T.reshape(len(pack), len(columns))
    return np.hstack([serving_features(pack), extra])


def _turn_of(result: dict) -> tuple[int, int] | None:
    """(session, turn) of the result's first cited locator (``D<session>:<turn>``, as
    ``locomo.normalize_dia_id`` wrote it)."""
    if not result["cited"]:
        return None
    session, turn = result["cited"][0][1:].split(":")
    return int(session), int(turn)


def neighbour_features(pack: Pack) -> Any:
    """The pack-relative features plus, per result: how many of the hand-set top LIMIT
    come from its session; how many results are its neighbours (same session, within
    NEIGHBOUR_TURNS turns), and how many of those are in the top LIMIT; the best fused
    score among its neighbours and that minus its own."""
    turns = [_turn_of(r) for r in pack]
    fused = _filled(pack, "fused")
    columns = []
    for i, own in enumerate(turns):
        if own is None:
            columns.append([0.0] * 5)
            continue
        others = {j: t[1] for j, t in enumerate(turns) if j != i and t and t[0] == own[0]}
        near = [j for j, turn in others.items() if abs(turn - own[1]) <= NEIGHBOUR_TURNS]
        best_near = max((fused[j] for j in near), default=0.0)
        columns.append(
            [
                float(sum(1 for j in others if j < LIMIT)),
                float(len(near)),
                float(sum(1 for j in near if j < LIMIT)),
                best_near,
                best_near - fused[i] if near else 0.0,
            ]
        )
    extra = np.array(columns, dtype=float).reshape(len(pack), 5)
    return np.hstack([pack_relative_features(pack), extra])


# --- models ------------------------------------------------------------------------------


def _pack_id(q: dict) -> str:
    return f"{q['conversation']}#{q['index']}"


def feedback_rows(train: Sequence[dict], labels: int) -> list[learned_rank.FeedbackRow]:
    """The feedback the training fold's questions would leave: every one of each pack's
    top ``labels`` results judged (bench/feedback.py judges the top LIMIT)."""
    return [
        learned_rank.FeedbackRow(
            pack_id=_pack_id(q),
            query_digest=_pack_id(q),
            rank=r["rank"],
            signal="up" if is_up(r, q["evidence"]) else "down",
            signals=r["signals"],
            fact_key=r["result_ref"],
        )
        for q in train
        for r in q["results"][:labels]
    ]


def replays(train: Sequence[dict], labels: int) -> list[learned_rank.Replay]:
    """What a fit replays for the training fold's questions: each question's whole
    candidate list (top DEPTH, as recorded) and the results its feedback marked up."""
    out = []
    for q in train:
        found = tuple(
            Result(
                Fact(
                    fact_key=r["result_ref"],
                    version_id=r["result_ref"],
                    scope_id="",
                    subject="",
                    predicate="",
                    object="",
                ),
                0.0,
                r["rank"],
                r["result_ref"],
                r["signals"],
            )
            for r in q["results"]
        )
        ups = frozenset(
            r["result_ref"] for r in q["results"][:labels] if is_up(r, q["evidence"])
        )
        out.append(learned_rank.Replay(_pack_id(q), found, ups))
    return out


def fit_serving(
    train: Sequence[dict], labels: int, *, obey_rule: bool = False
) -> tuple[Scorer | None, dict]:
    """``learned_rank.fit`` itself, default policy: the serving model, and whether the
    activation rule would let it serve; with ``obey_rule`` the hand-set order stays where
    the rule would not (what ``scripts/bench feedback`` measures through the stack)."""
    report = learned_rank.fit(
        feedback_rows(train, labels),
        replays(train, labels),
        learned_rank.FitPolicy(),
        new_id=lambda: "rank-ablation",
    )
    fit = {
        "outcome": report.outcome.value,
        "training_rows": report.training_rows,
        "evaluated_packs": report.evaluated_packs,
        "model_figure": report.model.mrr,
        "hand_figure": report.hand.mrr,
    }
    ranker = report.ranker
    if ranker is None or (obey_rule and not report.activate):
        return None, fit
    window = ranker.window
    # Below its window the model leaves the hand-set order (learned_rank.reorder).
    return (
        lambda pack: [
            ranker.score(r["signals"]) if n < window else -float(n)
            for n, r in enumerate(pack)
        ]
    ), fit


def _pairwise(featurize: Featurizer) -> Callable[[Sequence[dict], int], tuple[Scorer | None, dict]]:
    return lambda train, labels: fit_pairwise(train, labels, featurize)


def fit_pairwise(
    train: Sequence[dict], labels: int, featurize: Featurizer
) -> tuple[Scorer | None, dict]:
    """learned_rank's own trainer (standardization, every up against every down of a
    pack, the same regularization) over a wider matrix; only its numbers are read, since
    the LinearRanker it returns names the serving features."""
    rows = feedback_rows(train, labels)
    if not rows:
        return None, {"training_rows": 0}
    matrix = np.vstack([featurize(q["results"])[:labels] for q in train])
    trained = learned_rank.train_ranker(matrix, rows, range(len(rows)), "rank-ablation")
    if trained is None:
        return None, {"training_rows": len(rows)}
    mean, scale, coef = (np.array(v) for v in (trained.mean, trained.scale, trained.coef))
    return (lambda pack: list(((featurize(pack) - mean) / scale) @ coef)), {
        "training_rows": len(rows)
    }


def fit_gbdt(
    train: Sequence[dict], labels: int, featurize: Featurizer
) -> tuple[Scorer | None, dict]:
    """Pointwise gradient-boosted trees: P(up) per result."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rows = feedback_rows(train, labels)
    y = np.array([1 if r.signal == "up" else 0 for r in rows])
    if len(set(y)) < 2:
        return None, {"training_rows": len(rows)}
    matrix = np.vstack([featurize(q["results"])[:labels] for q in train])
    model = HistGradientBoostingClassifier(**GBDT).fit(matrix, y)
    return (lambda pack: list(model.predict_proba(featurize(pack))[:, 1])), {
        "training_rows": len(rows)
    }


@dataclass(frozen=True)
class Variant:
    name: str
    labels: int  # each training question's top N results are judged
    fit: Callable[[Sequence[dict], int], tuple[Scorer | None, dict]]


VARIANTS = (
    Variant("serving model (learned_rank.fit)", LIMIT, fit_serving),
    Variant("serving model (learned_rank.fit)", DEPTH, fit_serving),
    Variant(
        "serving model where the activation rule serves it",
        LIMIT,
        lambda t, n: fit_serving(t, n, obey_rule=True),
    ),
    *(
        Variant(name, labels, _pairwise(featurize))
        for name, featurize in (
            ("pairwise LR + pack-relative", pack_relative_features),
            ("pairwise LR + pack-relative + neighbours", neighbour_features),
        )
        for labels in (LIMIT, DEPTH)
    ),
    *(
        Variant(
            "GBDT pointwise, all features", labels, lambda t, n: fit_gbdt(t, n, neighbour_features)
        )
        for labels in (LIMIT, DEPTH)
    ),
)
HAND_SET = "hand-set"
CEILING = "ceiling (oracle order of the top 30)"


def learned_order(pack: Pack, scores: Sequence[float]) -> list[int]:
    """Higher score first; ties keep the hand-set order (as learned_rank.reorder)."""
    return sorted(
        range(len(pack)),
        key=lambda i: (-scores[i], learned_rank.hand_rank(pack[i]["signals"])),
    )


def oracle_order(pack: Pack, evidence: Sequence[str]) -> list[int]:
    """Greedy: each next result is the one citing the most evidence turns not cited
    above it (ties keep the hand-set order), so the first hit comes first and every
    hit@k, MRR and (with one evidence turn per result) recall@k is the best possible."""
    wanted = set(evidence)
    left = list(range(len(pack)))
    order = []
    while left:
        best = max(left, key=lambda i: (len(wanted & set(pack[i]["cited"])), -i))
        order.append(best)
        left.remove(best)
        wanted -= set(pack[best]["cited"])
    return order


def _score(tally: Tally, q: dict, order: Sequence[int]) -> None:
    tally.add([q["results"][i]["cited"] for i in order], q["evidence"], q["category"])


def ablate(questions: Sequence[dict], folds: Sequence[Sequence[str]]) -> list[dict]:
    """Per row: a Tally per evaluation fold (each fitted on the other fold) and the fits."""
    by_fold = [[q for q in questions if q["conversation"] in set(f)] for f in folds]
    names = [HAND_SET, *(f"{v.name}|{v.labels}" for v in VARIANTS), CEILING]
    rows: dict[str, dict] = {n: {"tallies": [], "fits": []} for n in names}
    for number, evaluate in enumerate(by_fold):
        train = [q for other, f in enumerate(by_fold) if other != number for q in f]
        hand, ceiling = Tally(), Tally()
        for q in evaluate:
            _score(hand, q, range(len(q["results"])))
            _score(ceiling, q, oracle_order(q["results"], q["evidence"]))
        rows[HAND_SET]["tallies"].append(hand)
        rows[CEILING]["tallies"].append(ceiling)
        for variant in VARIANTS:
            scorer, fit = variant.fit(train, variant.labels)
            tally = Tally()
            for q in evaluate:
                pack = q["results"]
                scores = scorer(pack) if scorer is not None and pack else [0.0] * len(pack)
                _score(tally, q, learned_order(pack, scores))
            rows[f"{variant.name}|{variant.labels}"]["tallies"].append(tally)
            rows[f"{variant.name}|{variant.labels}"]["fits"].append(fit)
    out = []
    for key, row in rows.items():
        name, _, labels = key.partition("|")
        out.append({"ranking": name, "labels": int(labels) if labels else None, **row})
    return out


# --- report ------------------------------------------------------------------------------


def _f(value: float, sign: bool = False) -> str:
    if not sign:
        return f"{value:.3f}"
    return f"{value:+.3f}" if round(value, 3) else "+0.000"  # never "-0.000"


def summarize_rows(rows: list[dict]) -> list[dict]:
    """Pooled summary (weighted by questions) and change against hand-set, per row."""
    hand = pool_tallies(rows[0]["tallies"]).summary()
    summarized = []
    for row in rows:
        pooled = pool_tallies(row["tallies"]).summary()
        summarized.append(
            {
                "ranking": row["ranking"],
                "labels": row["labels"],
                "summary": pooled,
                "change": {m: pooled[m] - hand[m] for m in METRIC_NAMES},
                "folds": [t.summary() for t in row["tallies"]],
                "fits": row["fits"],
            }
        )
    return summarized


def format_table(rows: list[dict]) -> str:
    header = [
        "ranking",
        "labels",
        *METRIC_NAMES,
        *(f"change {m}" for m in METRIC_NAMES),
        "activation rule (fold 1 / 2)",
        "n",
    ]
    table = [header]
    for row in rows:
        outcomes = [f["outcome"] for f in row["fits"] if "outcome" in f]
        table.append(
            [
                row["ranking"],
                f"top {row['labels']}" if row["labels"] else "",
                *(_f(row["summary"][m]) for m in METRIC_NAMES),
                *(
                    ("" if row["ranking"] == HAND_SET else _f(row["change"][m], sign=True))
                    for m in METRIC_NAMES
                ),
                " / ".join(outcomes),
                str(row["summary"]["questions"]),
            ]
        )
    return render_table(table)


def load_dump(path: Path) -> dict:
    dump = json.loads(path.read_text())
    if not isinstance(dump, dict) or not {"folds", "questions"} <= set(dump):
        raise SystemExit(f"{path}: not a --rank-ablation dump (needs 'folds' and 'questions')")
    return dump


def make_dump(data: Path, conversations: int, max_questions: int, ingest_deadline: float) -> dict:
    loaded = locomo.load(data)
    if conversations:
        loaded = loaded[:conversations]
    if max_questions:
        loaded = [dataclasses.replace(c, questions=c.questions[:max_questions]) for c in loaded]
    folds = [[c.sample_id for c in fold] for fold in two_folds(loaded)]
    print(f"LoCoMo: {len(loaded)} conversations, folds {folds}", file=sys.stderr)
    questions, timings, ingest_failures, errors = collect(loaded, ingest_deadline)
    return {
        "bench": "locomo-dev get_context top 30 with signals",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "settings": {
            "data": str(data),
            "depth": DEPTH,
            "token_budget": TOKEN_BUDGET,
            "conversations": len(loaded),
            "max_questions": max_questions or None,
            "quota_enabled": False,
        },
        "folds": folds,
        "timings": timings,
        "ingest_failures": ingest_failures,
        "errors": errors,
        "questions": questions,
    }


def main(
    out: Path,
    *,
    data: Path = DEFAULT_DATA,
    conversations: int = 0,
    max_questions: int = 0,
    ingest_deadline: float = INGEST_DEADLINE_SECONDS,
    dump_to: Path | None = None,
    from_dump: Path | None = None,
) -> dict:
    wall = time.perf_counter()
    if from_dump is not None:
        dump = load_dump(from_dump)
    else:
        dump = make_dump(data, conversations, max_questions, ingest_deadline)
        if dump_to is not None:
            dump_to.parent.mkdir(parents=True, exist_ok=True)
            dump_to.write_text(json.dumps(dump, ensure_ascii=False) + "\n")
            print(f"wrote {dump_to}", file=sys.stderr)
    t0 = time.perf_counter()
    rows = summarize_rows(ablate(dump["questions"], dump["folds"]))
    offline_s = time.perf_counter() - t0
    table = format_table(rows)
    machine = machine_info()
    now = dt.datetime.now(dt.UTC)
    print()
    print(
        f"LoCoMo dev, rank ablation, questions asked {dump['date'][:10]} "
        f"({dump['machine']['cpu_count']} CPUs), {len(dump['questions'])} questions; each fold "
        f"of conversations ({' / '.join('+'.join(f) for f in dump['folds'])}) reordered by "
        f"models fitted on the other, pooled; the top {DEPTH} reordered, the top {LIMIT} scored"
    )
    print(table, flush=True)
    failed = sum(q["error"] for q in dump["questions"])
    if failed:
        print(f"WARNING: {failed} get_context calls failed (scored empty)", file=sys.stderr)
    print(
        f"offline fits {offline_s:.1f} s, wall time {time.perf_counter() - wall:.1f} s",
        file=sys.stderr,
    )
    report = {
        "bench": "locomo-dev rank ablation",
        "date": now.isoformat(timespec="seconds"),
        "machine": machine,
        "dump": {
            "source": str(from_dump) if from_dump is not None else "stack",
            "date": dump["date"],
            "machine": dump["machine"],
            "settings": dump.get("settings"),
            "timings": dump.get("timings"),
            "failed_questions": failed,
        },
        "settings": {
            "depth": DEPTH,
            "scored": LIMIT,
            "seed": SEED,
            "gbdt": GBDT,
            "pack_relative": list(PACK_RELATIVE),
            "neighbour_turns": NEIGHBOUR_TURNS,
        },
        "folds": [
            {"fold": n, "evaluate": list(f), "questions": s["questions"]}
            for n, (f, s) in enumerate(zip(dump["folds"], rows[0]["folds"], strict=True), 1)
        ],
        "rows": rows,
        "table": table,
        "offline_s": offline_s,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return report


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench rank-ablation", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--ablation-out", dest="out", type=Path, default=DEFAULT_OUT)
    add_data_options(parser)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--dump", type=Path, help="also write the questions' top 30 here")
    source.add_argument(
        "--from-dump",
        type=Path,
        help="start from a --dump file instead of a stack (the data options are ignored)",
    )
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    report = main(
        args.out,
        data=args.data,
        conversations=args.conversations,
        max_questions=args.max_questions,
        ingest_deadline=args.ingest_deadline,
        dump_to=args.dump,
        from_dump=args.from_dump,
    )
    record.write("rank-ablation", argv, [record.from_markdown(report["table"])],
                 wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
