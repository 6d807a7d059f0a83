"""bench/sparse_scale.py on a small corpus: with each project scope alone in its shard and
a prefetch deeper than the project, Qdrant's sparse leg finds the memory BM25's top 50 and
scores each of them as the memory does; the report carries every figure it prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench import sparse_scale  # noqa: E402


def test_a_shard_per_scope_scores_as_the_memory_and_the_report_is_whole(tmp_path, capsys):
    out = tmp_path / "sparse_scale.json"
    code = sparse_scale.cli(
        ["--small", "150", "--large", "3000", "--prefetch", "200", "--rounds", "2",
         "--out", str(out)]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["facts"] == {"small": 150, "large": 3000}
    assert report["questions"] > 10
    memory, shard = report["rows"]["memory BM25 (today)"], report["rows"][
        "shard per scope, prefetch 200"]
    for row in (memory, shard):
        for scope in ("small", "large"):
            assert row[f"{scope}_first_p50_ms"] > 0 and row[f"{scope}_again_p50_ms"] > 0
    # The same formulation over the same statistics: equal scores where both found a fact.
    assert shard["small_max_relative_score_difference"] < 1e-4
    assert shard["small_top50_share"] >= 0.99
    assert "shard per scope, prefetch 200" in capsys.readouterr().out
    kept = json.loads((tmp_path / "records" / "sparse-scale.json").read_text())
    assert [row[0] for row in kept["tables"][0]["rows"]] == list(report["rows"])
