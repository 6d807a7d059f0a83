"""docs/benchmarks.md is scripts/gen-bench-docs' rendering of the benches' records
(bench/records/, which each `scripts/bench NAME` run writes), byte for byte, so the figures
on the page are the latest runs' and cannot be edited by hand; every bench has a record."""

from __future__ import annotations

import copy
import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import cli, record
from bench.metrics import METRIC_NAMES
from bench.run import record_of

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> SimpleNamespace:
    return SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "gen-bench-docs")))


def _committed() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text())
            for path in sorted((ROOT / "bench" / "records").glob("*.json"))}


def _report() -> dict:
    """A `scripts/bench locomo` JSON report, with the per-question detail a record drops."""
    metrics = {"hit@5": 0.8, "hit@10": 0.85, "recall@5": 0.7, "recall@10": 0.78,
               "mrr@10": 0.6}
    return {
        "bench": "locomo-dev retrieval",
        "command": "scripts/bench locomo",
        "date": "2026-12-07T12:00:00+00:00",
        "machine": {"cpu_model": "AMD EPYC", "machine": "x86_64", "cpu_count": 2,
                    "platform": "Linux"},
        "dataset": {"conversations": 5, "scored_questions": 760, "turns": 3000},
        "timings": {"wall_s": 300.0, "ingest_s": 20.0},
        "summary": {"VERA search": {**metrics, "p50_ms": 30.0, "p95_ms": 40.0, "errors": 0},
                    "BM25": {**metrics, "p50_ms": 1.0, "p95_ms": 1.5}},
        "ablation": {
            "embedder": "onnx-int8", "in_process_ms": {"p50": 12.0, "p95": 15.0},
            "embed_ms": {"p50": 4.0, "p95": 5.0},
            "configs": {"full pipeline": {**metrics, "by_category": {}},
                        "fusion: minmax, dense weight 0.6": {**metrics, "hit@5": 0.81,
                                                             "p50_ms": 12.5},
                        "fusion: best, dense weight 0.5": metrics,
                        "fusion chosen leave-one-conversation-out": {**metrics,
                                                                     "hit@5": 0.81}},
            "fusion": {"chosen": {"conv-26": "fusion: minmax, dense weight 0.6"}},
        },
        "questions": [{"question": "kept out of the record"}],
    }


def test_the_page_is_generated_from_the_records() -> None:
    gen = _generator()
    assert gen.PAGE.read_text() == gen.render(gen.load_records()), "run scripts/gen-bench-docs"
    assert gen.main(["gen-bench-docs", "--check"]) == 0
    assert len(gen.PAGE.read_text().splitlines()) <= 400


def test_every_bench_has_a_record_and_a_section() -> None:
    records = _committed()
    assert sorted(set(cli.BENCHES) - set(records)) == []
    gen = _generator()
    for name in ("hops", "scale"):
        with pytest.raises(SystemExit, match=f"{name}.json"):
            gen.render({k: v for k, v in records.items() if k != name})
    with pytest.raises(SystemExit, match="a-new-bench"):
        gen.render(records, [*cli.BENCHES, "a-new-bench"])
    with pytest.raises(SystemExit, match="stray"):
        gen.render({**records, "stray": records["hops"]})


def test_every_record_names_its_command_date_machine_and_figures() -> None:
    for name, kept in _committed().items():
        assert kept["command"].startswith(("scripts/bench", "scripts/load", "VERA_")), name
        if kept["date"] is None:  # a bench never run yet says so, with no figure
            assert kept["tables"] == [] and "not run" in kept["source"], name
            continue
        assert "cpu_count" in kept["machine"], name
        assert kept.get("tables") or kept.get("summary"), name


def test_a_locomo_record_keeps_the_figures_not_the_questions() -> None:
    kept = record_of(_report())
    assert "questions" not in kept and kept["command"] == "scripts/bench locomo"
    assert set(kept["summary"]["VERA search"]) == {*METRIC_NAMES, "p50_ms", "p95_ms"}
    assert "by_category" not in kept["ablation"]["configs"]["full pipeline"]
    assert "fusion: minmax, dense weight 0.6" in kept["ablation"]["configs"]


def test_a_changed_figure_changes_the_page_and_only_there() -> None:
    gen = _generator()
    records = {**_committed(), "locomo": record_of(_report())}
    first = gen.render(records)
    assert "| VERA knowledge_search | 0.800 |" in first
    assert "| minmax, dense weight 0.6 | 0.810 | 0.780 | 0.600 | 12.5 |" in first
    assert "chose `minmax, dense weight 0.6`, scoring hit@5 0.810" in first
    changed = copy.deepcopy(records)
    changed["tracing-overhead"]["tables"][0]["rows"][0][2] = 99.25
    second = gen.render(changed)
    assert "| 99.2 |" in second or "| 99.3 |" in second
    assert [a for a, b in zip(first.splitlines(), second.splitlines(), strict=True)
            if a != b] != []
    assert len(first.splitlines()) == len(second.splitlines())


def test_a_bench_writes_its_record(tmp_path: Path) -> None:
    figures = record.table(["hop", "n", "p50 ms"], [["retrieval", 60, 26.04]],
                           digits=[None, 0, 1], title="60 questions:")
    path = record.write("hops", ["--questions", "60"], [figures], wall_s=12.34,
                        directory=tmp_path)
    kept = json.loads(path.read_text())
    assert path.name == "hops.json" and kept["bench"] == "hops"
    assert kept["command"] == "scripts/bench hops --questions 60" and kept["wall_s"] == 12.3
    assert set(kept["machine"]) == set(record.MACHINE_KEYS) and kept["date"][:2] == "20"
    assert record.as_markdown(kept["tables"][0]) == [
        "60 questions:", "", "| hop | n | p50 ms |", "|---|---|---|", "| retrieval | 60 | 26.0 |"]
    with pytest.raises(ValueError, match="3 cells"):
        record.table(["a", "b", "c"], [[1, 2]])


def test_a_printed_table_keeps_its_numbers_as_numbers() -> None:
    parsed = record.from_markdown("| facts | p50 / p95 ms | x |\n|-------|-----|---|\n"
                                  "| 10000 | 24.0 / 27.5 | 2.83 |\n| 100000 | - | 2.00 |")
    assert parsed["digits"] == [0, None, 2]
    assert parsed["rows"] == [[10000, "24.0 / 27.5", 2.83], [100000, "-", 2.0]]
    assert record.as_markdown(parsed)[-1] == "| 100000 | - | 2.00 |"
