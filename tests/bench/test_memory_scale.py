"""bench/memory_scale.py on a tiny corpus: the figures it prints are there and sane (the
sizes themselves are the bench's to measure, not a test's)."""

from __future__ import annotations

from bench import memory_scale


def test_memory_figures_cover_the_scope_structures() -> None:
    result = memory_scale.measure_memory(2000, seed=3)
    parts = result["scope_breakdown_bytes_per_fact"]
    # float16 vectors are the floor: 2 bytes per dimension, more with the doubling capacity.
    assert parts["vectors"] >= 2 * memory_scale.DIMENSIONS
    assert {"postings", "version_ids", "slot_of", "sources"} <= parts.keys()
    assert result["scope_bytes_per_fact"] >= sum(parts.values()) - 1


def test_query_timings_are_interleaved_medians_of_both_sizes() -> None:
    result = memory_scale.measure_queries(200, 1000, rounds=2, seed=3)
    assert result["queries"] > 50  # every generated question, asked of both projects
    assert result["small_p50_ms"] > 0 and result["large_p50_ms"] > 0
    # The first round apart: each question's first asking, before its terms were kept.
    assert result["first_round_small_p50_ms"] > 0 and result["first_round_large_p50_ms"] > 0
