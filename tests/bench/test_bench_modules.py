"""No bench module grows past 700 lines (issue 46): a bench that outgrows it is split by job,
as the scale bench was into its corpus, its measurements and its run."""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
MAX_LINES = 700


def test_no_bench_module_is_over_700_lines() -> None:
    sizes = {str(p.relative_to(BENCH)): len(p.read_text().splitlines())
             for p in sorted(BENCH.rglob("*.py"))}
    assert len(sizes) > 20
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
