"""docs/benchmarks.md's generated blocks are scripts/gen-bench-docs' rendering of the benches'
records (bench/records/, kept from their JSON output), byte for byte, so the figures on the
page are the latest run's and cannot be edited by hand."""

from __future__ import annotations

import copy
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> SimpleNamespace:
    return SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "gen-bench-docs")))


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
                                                                     "hit@5": 0.81},
                        "an unlisted study": metrics},
            "fusion": {"chosen": {"conv-26": "fusion: minmax, dense weight 0.6"}},
        },
        "questions": [{"question": "kept out of the record"}],
    }


def test_the_page_is_generated_from_the_records() -> None:
    gen = _generator()
    page = gen.PAGE.read_text()
    assert page == gen.render(page, gen.load_records()), "run scripts/gen-bench-docs"
    assert gen.main(["gen-bench-docs", "--check"]) == 0


def test_a_record_keeps_the_figures_not_the_questions() -> None:
    gen = _generator()
    file, kept = gen.record(_report())
    assert file == "locomo.json"
    assert "questions" not in kept and kept["command"] == "scripts/bench locomo"
    assert set(kept["summary"]["VERA search"]) == {*gen.METRICS, "p50_ms", "p95_ms"}
    assert "an unlisted study" not in kept["ablation"]["configs"]
    assert "fusion: minmax, dense weight 0.6" in kept["ablation"]["configs"]


def test_a_changed_figure_changes_the_block_and_only_it() -> None:
    gen = _generator()
    _, kept = gen.record(_report())
    page = ("# before\n<!-- gen-bench-docs locomo -->\nSTALE BLOCK\n"
            "<!-- /gen-bench-docs locomo -->\n# after\n")
    first = gen.render(page, {"locomo.json": kept})
    assert first.startswith("# before\n") and first.endswith("# after\n")
    assert "| VERA knowledge_search | 0.800 |" in first and "STALE BLOCK" not in first
    assert "| minmax, dense weight 0.6 | 0.810 | 0.780 | 0.600 | 12.5 |" in first
    assert "chose `minmax, dense weight 0.6`, scoring hit@5 0.810" in first
    changed = copy.deepcopy(kept)
    changed["summary"]["VERA search"]["hit@5"] = 0.5
    second = gen.render(first, {"locomo.json": changed})
    assert second != first and "| VERA knowledge_search | 0.500 |" in second
    assert gen.render(second, {"locomo.json": changed}) == second


def test_a_missing_block_or_record_or_an_unknown_bench_stops_the_generator() -> None:
    gen = _generator()
    _, kept = gen.record(_report())
    with pytest.raises(SystemExit, match="locomo"):
        gen.render("# no block\n", {"locomo.json": kept})
    with pytest.raises(SystemExit, match=r"locomo\.json"):
        gen.render("<!-- gen-bench-docs locomo -->\n<!-- /gen-bench-docs locomo -->\n", {})
    with pytest.raises(SystemExit, match="nobody"):
        gen.record({**_report(), "bench": "nobody"})

