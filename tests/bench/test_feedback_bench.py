"""`scripts/bench feedback --feedback-quick` end to end on a small LoCoMo-format file: a
real stack, the official MCP client, feedback through `knowledge_feedback`, fits through
the retrieval service. Asserts the report's shape and that the feedback reached the store
through the tool and each fold's fit used only its own fold's rows; not who wins."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench import cli, feedback  # noqa: E402
from bench.metrics import METRIC_NAMES  # noqa: E402

pytestmark = pytest.mark.e2e

_PEOPLE = (("Ann", "Bo"), ("Cy", "Di"))
_THINGS = (
    "pottery class",
    "charity run",
    "new kiln",
    "trip to Lisbon",
    "guitar lessons",
    "vegetable garden",
    "book club",
    "job interview",
    "rescue dog",
    "chess match",
    "birthday party",
    "yoga retreat",
    "camping weekend",
    "cooking course",
    "art exhibition",
    "marathon training",
    "piano recital",
    "beach house",
)
_FILLER = (
    "How was your week?",
    "That sounds lovely.",
    "I have been busy lately.",
    "Tell me more about it.",
    "We should meet up soon.",
    "I am so happy for you.",
)


def _sample(number: int, rng: random.Random) -> dict:
    """One conversation: three sessions of mentions and filler; a question per mention,
    its evidence the turn that mentions it."""
    a, b = _PEOPLE[number]
    conversation: dict = {"speaker_a": a, "speaker_b": b}
    qa = []
    things = rng.sample(_THINGS, 12)
    for session in range(1, 4):
        conversation[f"session_{session}_date_time"] = f"1:{10 + session} pm on {session} May, 2023"
        turns = []
        for turn in range(1, 9):
            speaker = a if turn % 2 else b
            dia_id = f"D{session}:{turn}"
            if turn % 2 and things:
                thing = things.pop()
                text = f"I went to the {thing} on {rng.choice(('Monday', 'Friday'))}."
                qa.append(
                    {
                        "question": f"What did {speaker} say about the {thing}?",
                        "answer": thing,
                        "evidence": [dia_id],
                        "category": 1 + len(qa) % 4,
                    }
                )
            else:
                text = rng.choice(_FILLER)
            turns.append({"speaker": speaker, "dia_id": dia_id, "text": text})
        conversation[f"session_{session}"] = turns
    return {"sample_id": f"conv-t{number}", "conversation": conversation, "qa": qa}


def test_quick_feedback_bench_records_feedback_through_the_tool_and_reports_both_folds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    # Low enough that the quick run's feedback (8 packs of 10 judged results per fold) is
    # fitted and judged out of fold, while its 10-row curve point is refused.
    monkeypatch.setenv("VERA_RETRIEVAL__RANK__MIN_FEEDBACK_ROWS", "20")
    monkeypatch.setenv("VERA_RETRIEVAL__RANK__MIN_PACKS", "4")
    rng = random.Random(3)
    data = tmp_path / "locomo-small.json"
    data.write_text(json.dumps([_sample(0, rng), _sample(1, rng)]))
    out = tmp_path / "feedback.json"

    assert (
        cli.main(
            ["feedback", "--feedback-quick", "--data", str(data), "--feedback-out", str(out)]
        )
        == 0
    )

    report = json.loads(out.read_text())
    folds = report["folds"]
    assert [f["fold"] for f in folds] == [1, 2]
    assert {tuple(f["train"]) for f in folds} == {tuple(f["evaluate"]) for f in folds}
    assert all(not set(f["train"]) & set(f["evaluate"]) for f in folds)
    for fold in folds:
        recorded = fold["feedback"]
        assert fold["errors"] == []
        assert recorded["questions_asked"] == 8  # the quick run's questions per conversation
        # Every row the tool reported created is in the knowledge store, no other.
        assert recorded["rows_created"] > 0
        assert recorded["stored"] == recorded["signals"]
        assert set(recorded["signals"]) == {"up", "down"}
        before = fold["before"]["summary"]
        assert before["questions"] == 8 and before["p50_ms"] > 0
        *curve, every = fold["points"]
        assert every["all"] and every["rows"] == recorded["rows_created"]
        assert [p["rows"] for p in curve] == [feedback.QUICK["curve"][0]]
        assert curve[0]["fit"]["outcome"] == "too_little_feedback"
        assert not curve[0]["fit"]["activated"]
        assert every["fit"]["outcome"] in {"activated", "not_better", "worse_at_top"}  # judged
        # Every fit was turned off after its pass: the hand-set ranking is back, exactly.
        assert fold["rollback_identical"] and fold["again"]["summary"]["questions"] == 8
        for point in fold["points"]:
            # The fit saw exactly the rows asked for, from this fold only (`since`).
            assert point["fit"]["training_rows"] == point["rows"]
            assert point["summary"]["questions"] == 8
            assert set(METRIC_NAMES) <= set(point["summary"])

    printed = capsys.readouterr().out
    for table in (report["table"], report["category_table"], report["curve_table"]):
        assert table in printed
    rows = [
        [c.strip() for c in line.strip("|").split("|")] for line in report["table"].splitlines()
    ]
    assert rows[0] == ["evaluation", "ranking", *METRIC_NAMES, "p50 ms", "p95 ms", "n"]
    body = rows[2:]  # per fold and both: hand-set, after the fit, hand-set again, change
    assert [r[0] for r in body[::4]] == [
        *(f"fold {f['fold']} ({f['evaluate'][0]})" for f in folds),
        "both folds",
    ]
    assert [r[1] for r in body[::4]] == ["hand-set"] * 3
    assert [r[1] for r in body[2::4]] == ["hand-set again (rank off)"] * 3
    assert [r[1] for r in body[3::4]] == ["change"] * 3
    assert len(report["curve_table"].splitlines()) == 2 + sum(len(f["points"]) for f in folds)
    kept = json.loads((tmp_path / "records" / "feedback.json").read_text())
    assert kept["tables"][0]["columns"] == rows[0]
    assert len(kept["tables"][0]["rows"]) == len(rows) - 2  # less the header and its rule
    # What each fit decided: one row per fit, its outcome as the fit reported it.
    decided = kept["tables"][2]
    assert [(r[0], r[2]) for r in decided["rows"]] == [
        (f["fold"], f"`{p['fit']['outcome']}`") for f in folds for p in f["points"]]
    refused = decided["rows"][0]  # too little feedback: never judged
    assert refused[4:7] == ["-", "-", "-"]
