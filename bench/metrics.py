"""Retrieval scoring: hit@k, recall@k, MRR@10, latency percentiles, per-category tables.

A ranking is a list of results, best first; each result is the set of dia_ids its
citations carry (a baseline result carries exactly one). A result hits when one of them
is an evidence dia_id of the question.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

KS = (5, 10)
MRR_K = 10
METRIC_NAMES = ("hit@5", "hit@10", "recall@5", "recall@10", "mrr@10")

Ranking = Sequence[Iterable[str]]


def _sets(ranking: Ranking) -> list[frozenset[str]]:
    return [frozenset(locators) for locators in ranking]


def hit_at(ranking: Ranking, evidence: Iterable[str], k: int) -> float:
    wanted = set(evidence)
    return 1.0 if any(r & wanted for r in _sets(ranking)[:k]) else 0.0


def recall_at(ranking: Ranking, evidence: Iterable[str], k: int) -> float:
    """Share of the question's evidence turns cited by the top k results."""
    wanted = set(evidence)
    if not wanted:
        return 0.0
    found: set[str] = set()
    for result in _sets(ranking)[:k]:
        found |= result & wanted
    return len(found) / len(wanted)


def reciprocal_rank(ranking: Ranking, evidence: Iterable[str], k: int = MRR_K) -> float:
    wanted = set(evidence)
    for rank, result in enumerate(_sets(ranking)[:k], start=1):
        if result & wanted:
            return 1.0 / rank
    return 0.0


def score_question(ranking: Ranking, evidence: Iterable[str]) -> dict[str, float]:
    evidence = list(evidence)
    return {
        "hit@5": hit_at(ranking, evidence, 5),
        "hit@10": hit_at(ranking, evidence, 10),
        "recall@5": recall_at(ranking, evidence, 5),
        "recall@10": recall_at(ranking, evidence, 10),
        "mrr@10": reciprocal_rank(ranking, evidence, MRR_K),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Tally:
    """Accumulates one system's per-question scores and latencies."""

    scores: list[dict[str, float]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def add(self, ranking: Ranking, evidence: Iterable[str], category: str,
            latency_ms: float | None = None) -> dict[str, float]:
        score = score_question(ranking, evidence)
        self.scores.append(score)
        self.categories.append(category)
        if latency_ms is not None:
            self.latencies_ms.append(latency_ms)
        return score

    def summary(self) -> dict[str, float | int]:
        return summarize(self.scores, self.latencies_ms)

    def by_category(self) -> dict[str, dict[str, float | int]]:
        groups: dict[str, list[dict[str, float]]] = {}
        for category, score in zip(self.categories, self.scores, strict=True):
            groups.setdefault(category, []).append(score)
        return {name: summarize(groups[name]) for name in sorted(groups)}


def summarize(scores: Sequence[dict[str, float]],
              latencies_ms: Sequence[float] = ()) -> dict[str, float | int]:
    out: dict[str, float | int] = {"questions": len(scores)}
    for name in METRIC_NAMES:
        out[name] = (sum(s[name] for s in scores) / len(scores)) if scores else math.nan
    if latencies_ms:
        out["p50_ms"] = percentile(latencies_ms, 50)
        out["p95_ms"] = percentile(latencies_ms, 95)
    return out
