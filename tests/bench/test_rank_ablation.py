"""`scripts/bench rank-ablation`'s offline part on a small synthetic dump: one signal
(`dense_context`) separates the evidence results from the rest, and the hand-set order puts
them below the top 5. Every learned row must find that signal and the oracle must bound
every row; `--from-dump` runs end to end through the bench's command line, without a stack."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench import cli, locomo, rank_ablation  # noqa: E402
from bench.metrics import METRIC_NAMES  # noqa: E402

_UP_POSITIONS = (6, 8, 14)  # where the hand-set order puts each question's evidence
_CONVERSATIONS = ("conv-a", "conv-b", "conv-c", "conv-d")
_FOLDS = [["conv-a", "conv-b"], ["conv-c", "conv-d"]]


def _question(conversation: str, index: int, rng: random.Random) -> dict:
    results, evidence = [], []
    for position in range(1, rank_ablation.DEPTH + 1):
        up = position in _UP_POSITIONS
        locator = f"D{1 + position % 3}:{index * 40 + position}"
        if up:
            evidence.append(locator)
        fused = 1.5 - 0.03 * position  # the hand-set order: fused, reranked on top
        signals = {
            "dense": rng.uniform(0.3, 0.9),
            "lexical": rng.uniform(0.0, 1.0),
            "fused": fused,
            "final": fused,
            "dense_context": rng.uniform(0.6, 1.0) if up else rng.uniform(0.0, 0.4),
            "entity": float(rng.random() < 0.5),
            "boost": 1.0,
            "trust_tier": 1.0,
            "authority": 0.7,
            "stale": 0.0,
            "hand_rank": float(position),
        }
        if position <= 20:
            signals["rerank"] = fused
        results.append(
            {"rank": position, "result_ref": f"r{position}", "signals": signals, "cited": [locator]}
        )
    return {
        "conversation": conversation,
        "index": index,
        "category": "4 single-hop",
        "evidence": evidence,
        "error": False,
        "results": results,
    }


def _dump() -> dict:
    rng = random.Random(7)
    return {
        "date": "2026-12-01T00:00:00+00:00",
        "machine": {"cpu_count": 2},
        "folds": _FOLDS,
        "questions": [_question(c, i, rng) for c in _CONVERSATIONS for i in range(10)],
    }


def test_learned_rows_find_the_separating_signal_and_the_oracle_bounds_every_row():
    dump = _dump()

    rows = rank_ablation.summarize_rows(rank_ablation.ablate(dump["questions"], dump["folds"]))

    by_name = {(r["ranking"], r["labels"]): r for r in rows}
    assert len(by_name) == len(rows) == len(rank_ablation.VARIANTS) + 2
    hand = by_name[(rank_ablation.HAND_SET, None)]["summary"]
    assert hand["hit@5"] == 0.0 and hand["questions"] == 40
    ceiling = by_name[(rank_ablation.CEILING, None)]["summary"]
    assert ceiling["hit@5"] == ceiling["mrr@10"] == ceiling["recall@5"] == 1.0
    for row in rows:
        assert row["summary"]["questions"] == 40
        assert [f["questions"] for f in row["folds"]] == [20, 20]
        for metric in METRIC_NAMES:
            assert ceiling[metric] >= row["summary"][metric], (row["ranking"], metric)
        if row["ranking"] not in (rank_ablation.HAND_SET, rank_ablation.CEILING):
            assert row["summary"]["hit@5"] > hand["hit@5"], row["ranking"]
            assert row["change"]["mrr@10"] > 0, row["ranking"]
    serving = by_name[("serving model (learned_rank.fit)", rank_ablation.LIMIT)]
    # Each fold's model is learned_rank.fit's, on the training fold's top 10 judged.
    assert [f["training_rows"] for f in serving["fits"]] == [200, 200]
    assert [f["outcome"] for f in serving["fits"]] == ["activated", "activated"]


def test_from_dump_runs_end_to_end_without_a_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(_dump()))
    out = tmp_path / "rank_ablation.json"

    assert cli.main(["rank-ablation", "--from-dump", str(dump), "--ablation-out", str(out)]) == 0

    report = json.loads(out.read_text())
    assert report["dump"]["source"] == str(dump)
    assert [f["evaluate"] for f in report["folds"]] == _FOLDS
    assert [f["questions"] for f in report["folds"]] == [20, 20]
    names = [r["ranking"] for r in report["rows"]]
    assert names[0] == rank_ablation.HAND_SET and names[-1] == rank_ablation.CEILING
    assert report["table"] in capsys.readouterr().out
    lines = report["table"].splitlines()
    assert len(lines) == 2 + len(report["rows"])
    kept = json.loads((tmp_path / "records" / "rank-ablation.json").read_text())
    assert kept["command"] == f"scripts/bench rank-ablation --from-dump {dump} --ablation-out {out}"
    assert [row[0] for row in kept["tables"][0]["rows"]] == names


def test_question_record_keeps_the_top_30_with_their_own_conversations_citations():
    conv = locomo.Conversation("conv-a", (), (), 0, 0, ())
    q = locomo.Question("conv-a", 3, "What did Ann say?", 4, ("D1:2",))
    results = [
        {
            "rank": rank,
            "result_ref": f"r{rank}",
            "signals": {"fused": 1.0 / rank},
            "citations": [
                {"source_id": "conv-a-session_1", "locator": f"D1:{rank:02d}"},
                {"source_id": "conv-b-session_1", "locator": "D9:9"},  # another conversation
            ],
        }
        for rank in range(1, 36)
    ]
    random.Random(1).shuffle(results)

    record = rank_ablation.question_record(conv, q, {"results": results})

    assert [r["rank"] for r in record["results"]] == list(range(1, 31))
    assert [r["cited"] for r in record["results"]] == [[f"D1:{n}"] for n in range(1, 31)]
    assert record["evidence"] == ["D1:2"] and not record["error"]
    assert rank_ablation.question_record(conv, q, None)["error"]
