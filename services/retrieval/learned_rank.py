"""The learned ranking stage: features -> fit -> out-of-fold evaluation -> activation.

A model sees only numbers the pipeline computed itself (each result's signal vector, as the
gateway copied it from the persisted pack into a feedback row), never text. It is logistic
regression over standardized features, trained pairwise on result-level up/down feedback
(each ``up`` against each ``down`` of the same pack), and it may only reorder the results
the pipeline already found: it adds nothing and drops nothing.

Activation rule (``verdict``, the one home of it): out of fold (folds grouped by query,
so a question never sits on both sides), per persisted pack with at least one ``up`` and
one ``down``, order its labelled results (those with feedback) by the candidate ranker
and find the first ``up``; per query (a question asked in several packs counts once, as a
user's held-out question does) average its packs' reciprocal rank of that ``up`` (MRR) and
whether it is among the top ``HIT_AT`` (hit@5); then average over queries. The model is
activated only when it is not worse than the hand-set order (the pack's own ranks) at
the top, hit@5, and beats its MRR by more than ``min_gain``: a model that lifts a few
buried results to first place while pushing others out of the top five wins on MRR and
loses at the top (``worse_at_top``). hit@5 counts among the labelled results only, so a
pack with five or fewer of them cannot lose there: the guard binds on packs whose users
judged many results. Too little or one-sided feedback never
gets that far. Imports no gRPC, driver or storage code; ``fit`` is CPU work, run off the
event loop.
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from vera.services.retrieval.model import Result

METRIC = "mrr"
# The top of a pack a user reads first: "not worse" is judged on hit@HIT_AT.
HIT_AT = 5
# Figures are means of fractions: equal within this are equal.
_TIE = 1e-9
# The pipeline's signal names (pipeline.py) the features are built from; ``reranked`` says
# whether the rerank stage scored the result, ``hand_rank_inverse`` is 1 / its position in
# the hand-set order.
FEATURES: tuple[str, ...] = (
    "dense",
    "lexical",
    "fused",
    "rerank",
    "reranked",
    "dense_context",
    "entity",
    "boost",
    "trust_tier",
    "authority",
    "stale",
    "final",
    "hand_rank_inverse",
)
MAX_FOLDS = 5
_REGULARIZATION = 1.0


class FitOutcome(enum.StrEnum):
    ACTIVATED = "activated"
    TOO_LITTLE_FEEDBACK = "too_little_feedback"
    ONE_SIDED_FEEDBACK = "one_sided_feedback"
    NOT_BETTER = "not_better"
    WORSE_AT_TOP = "worse_at_top"


class NotServed(enum.StrEnum):
    """Why a model stored as active does not serve (the hand-set ranking does)."""

    OTHER_FEATURES = "fitted_on_other_features"  # an older release's feature set


class UnservableModel(ValueError):
    def __init__(self, reason: NotServed) -> None:
        super().__init__(reason.value)
        self.reason = reason


@dataclass(frozen=True)
class FeedbackRow:
    """One result-level feedback row: the pack it was given on, a digest of its query,
    the result's rank in the pack, ``up``/``down``, and the result's signal vector."""

    pack_id: str
    query_digest: str
    rank: int
    signal: str
    signals: Mapping[str, float]
    recorded_at: datetime | None = None


@dataclass(frozen=True)
class FitPolicy:
    min_rows: int = 50
    min_packs: int = 10
    min_gain: float = 0.01


def hand_rank(signals: Mapping[str, float], rank: int = 0) -> float:
    """The result's position in the hand-set order (recorded by the pipeline; a pack
    from before it recorded one has only its own rank)."""
    value = signals.get("hand_rank") or rank
    return float(value) if value and value > 0 else 1.0


def features(signals: Mapping[str, float], rank: int = 0) -> list[float]:
    derived = {
        "reranked": 1.0 if "rerank" in signals else 0.0,
        "hand_rank_inverse": 1.0 / hand_rank(signals, rank),
    }
    out = []
    for name in FEATURES:
        value = derived[name] if name in derived else signals.get(name, 0.0)
        out.append(float(value) if math.isfinite(value) else 0.0)
    return out


@dataclass(frozen=True)
class LinearRanker:
    """A fitted model: standardization and logistic-regression weights, over FEATURES.
    Plain numbers (stored as JSON, scored in pure Python: a few dozen products per call)."""

    model_id: str
    feature_names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def score(self, signals: Mapping[str, float], rank: int = 0) -> float:
        """Probability that the result earns an ``up`` (0..1)."""
        values = features(signals, rank)
        z = self.intercept + sum(
            w * (x - m) / s
            for w, x, m, s in zip(self.coef, values, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def parameters(self) -> dict[str, Any]:
        return {
            "features": list(self.feature_names),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
        }

    @classmethod
    def from_parameters(cls, model_id: str, parameters: Mapping[str, Any]) -> LinearRanker:
        names = tuple(parameters["features"])
        if names != FEATURES:
            # Weights for other features would score the wrong numbers: refuse to serve them.
            raise UnservableModel(NotServed.OTHER_FEATURES)
        return cls(
            model_id=model_id,
            feature_names=names,
            mean=tuple(float(v) for v in parameters["mean"]),
            scale=tuple(float(v) for v in parameters["scale"]),
            coef=tuple(float(v) for v in parameters["coef"]),
            intercept=float(parameters["intercept"]),
        )


@dataclass(frozen=True)
class Figures:
    """Out-of-fold figures of one order over the evaluated packs, averaged per query."""

    mrr: float = 0.0
    hit: float = 0.0  # hit@HIT_AT


@dataclass(frozen=True)
class FitReport:
    outcome: FitOutcome
    training_rows: int
    training_queries: int
    evaluated_packs: int
    model_figure: float = 0.0  # MRR
    hand_figure: float = 0.0
    ranker: LinearRanker | None = None  # fitted unless the feedback was too little/one-sided
    model_hit: float = 0.0  # hit@HIT_AT
    hand_hit: float = 0.0

    @property
    def activate(self) -> bool:
        return self.outcome is FitOutcome.ACTIVATED


def _evaluable_packs(rows: Sequence[FeedbackRow]) -> dict[str, list[int]]:
    packs: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        packs.setdefault(row.pack_id, []).append(i)
    return {
        pack: idx for pack, idx in packs.items() if {rows[i].signal for i in idx} == {"up", "down"}
    }


def evaluate(
    rows: Sequence[FeedbackRow], packs: Mapping[str, Sequence[int]], scores: Sequence[float]
) -> Figures:
    """Each pack's labelled rows ordered by ``scores`` (higher first; ties keep the
    hand-set order): the first ``up``'s reciprocal rank and whether it is in the top
    HIT_AT, averaged over a query's packs, then over queries."""
    first_ups: dict[str, list[int]] = {}
    for idx in packs.values():
        order = sorted(idx, key=lambda i: (-scores[i], hand_rank(rows[i].signals, rows[i].rank)))
        first_up = next(n for n, i in enumerate(order, start=1) if rows[i].signal == "up")
        first_ups.setdefault(rows[idx[0]].query_digest, []).append(first_up)
    if not first_ups:
        return Figures()

    def per_query(value: Callable[[int], float]) -> float:
        means = [sum(map(value, positions)) / len(positions) for positions in first_ups.values()]
        return sum(means) / len(means)

    return Figures(mrr=per_query(lambda n: 1.0 / n), hit=per_query(lambda n: float(n <= HIT_AT)))


def verdict(model: Figures, hand: Figures, min_gain: float) -> FitOutcome:
    """The activation rule (the module docstring): never worse at the top, and better
    on MRR by more than ``min_gain``."""
    if model.hit < hand.hit - _TIE:
        return FitOutcome.WORSE_AT_TOP
    if model.mrr <= hand.mrr + min_gain:
        return FitOutcome.NOT_BETTER
    return FitOutcome.ACTIVATED


def _standardize(matrix: Any) -> tuple[Any, Any]:
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    return mean, scale


def _pairs(matrix: Any, rows: Sequence[FeedbackRow], idx: Sequence[int]) -> tuple[Any, Any]:
    """Within each pack, every (up, down) pair's feature difference, both ways round: what
    a pack's order depends on is how its own results compare, not each one's raw scale (a
    question whose every score is low still has a best result)."""
    by_pack: dict[str, tuple[list[int], list[int]]] = {}
    for i in idx:
        ups, downs = by_pack.setdefault(rows[i].pack_id, ([], []))
        (ups if rows[i].signal == "up" else downs).append(i)
    diffs = [matrix[u] - matrix[d] for ups, downs in by_pack.values() for u in ups for d in downs]
    if not diffs:
        return np.empty((0, matrix.shape[1])), np.empty(0)
    x = np.array(diffs)
    return np.vstack([x, -x]), np.concatenate([np.ones(len(x)), np.zeros(len(x))])


def _train(
    matrix: Any, rows: Sequence[FeedbackRow], idx: Sequence[int], model_id: str
) -> LinearRanker | None:
    """Pairwise logistic regression over standardized features (a linear score, no
    intercept: only the order within a pack matters); None without a single pair."""
    mean, scale = _standardize(matrix[list(idx)])
    pairs, labels = _pairs((matrix - mean) / scale, rows, idx)
    if not len(labels):
        return None
    from sklearn.linear_model import LogisticRegression  # see fit()

    model = LogisticRegression(C=_REGULARIZATION, fit_intercept=False, max_iter=1000)
    model.fit(pairs, labels)
    return LinearRanker(
        model_id=model_id,
        feature_names=FEATURES,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        coef=tuple(float(v) for v in model.coef_[0]),
        intercept=0.0,
    )


def fit(
    rows: Sequence[FeedbackRow],
    policy: FitPolicy,
    new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> FitReport:
    """Trains on ``rows`` and decides whether the model may serve (the module docstring)."""
    rows = [r for r in rows if r.signals and r.signal in ("up", "down")]
    queries = {r.query_digest for r in rows}
    packs = _evaluable_packs(rows)
    counts = (len(rows), len(queries), len(packs))
    if {r.signal for r in rows} != {"up", "down"}:
        if len(rows) < policy.min_rows:
            return FitReport(FitOutcome.TOO_LITTLE_FEEDBACK, *counts)
        return FitReport(FitOutcome.ONE_SIDED_FEEDBACK, *counts)
    if len(rows) < policy.min_rows or len(packs) < policy.min_packs or len(queries) < 2:
        return FitReport(FitOutcome.TOO_LITTLE_FEEDBACK, *counts)

    matrix = np.array([features(r.signals, r.rank) for r in rows], dtype=float)
    labels = np.array([1 if r.signal == "up" else 0 for r in rows])
    groups = np.array([r.query_digest for r in rows])
    out_of_fold = np.array([-hand_rank(r.signals, r.rank) for r in rows]) * 1e-6
    # Imported on first use: scikit-learn takes ~1.5 s to import, which every retrieval
    # replica's start paid for a fit that runs rarely, in the background.
    from sklearn.model_selection import GroupKFold

    splitter = GroupKFold(n_splits=min(MAX_FOLDS, len(queries)))
    for train, held_out in splitter.split(matrix, labels, groups):
        fold_model = _train(matrix, rows, train, "oof")
        if fold_model is None:
            continue  # no pack with both signals to learn from: its rows keep the hand order
        out_of_fold[held_out] = [fold_model.score(rows[i].signals, rows[i].rank) for i in held_out]
    hand = evaluate(rows, packs, [-hand_rank(r.signals, r.rank) for r in rows])
    model = evaluate(rows, packs, list(out_of_fold))
    return FitReport(
        verdict(model, hand, policy.min_gain),
        *counts,
        model_figure=model.mrr,
        hand_figure=hand.mrr,
        ranker=_train(matrix, rows, range(len(rows)), new_id()),
        model_hit=model.hit,
        hand_hit=hand.hit,
    )


def reorder(results: Sequence[Result], ranker: LinearRanker) -> list[Result]:
    """The stage itself: the same results (the hand-set order's ``hand_rank`` recorded in
    each), ordered by the model's score; ties keep the hand-set order. Each result's score
    becomes the model's, and its ``learned`` signal says so."""
    scored = [
        replace(
            result,
            score=(learned := ranker.score(result.signals)),
            signals={**result.signals, "learned": learned},
        )
        for result in results
    ]
    return sorted(scored, key=lambda r: (-r.score, hand_rank(r.signals)))


@dataclass(frozen=True)
class ServedModel:
    """An active model with the contract version the scope is served with while it is."""

    ranker: LinearRanker
    assembler_version: str


@dataclass
class ActiveModels:
    """What serves now: the deployment-wide model (key None) and per-project ones; swapped
    whole when a model is activated or turned off, so a call sees one consistent set."""

    by_scope: dict[str | None, ServedModel] = field(default_factory=dict)

    def select(self, scope_ids: Sequence[str]) -> ServedModel | None:
        """A project's own model ranks only requests within that one project; every other
        request gets the deployment-wide model, if any."""
        if len(scope_ids) == 1 and scope_ids[0] in self.by_scope:
            return self.by_scope[scope_ids[0]]
        return self.by_scope.get(None)


@dataclass(frozen=True)
class RankRecord:
    """One stored fit (retrieval.rank_models); ``scope_id`` None is deployment-wide."""

    model_id: str
    scope_id: str | None
    outcome: FitOutcome
    active: bool
    training_rows: int
    training_queries: int
    evaluated_packs: int
    model_figure: float
    hand_figure: float
    trained_at: datetime
    newest_feedback_at: datetime | None = None
    ranker: LinearRanker | None = None
    metric: str = METRIC
    model_hit: float | None = None  # None: recorded before hit@HIT_AT was measured
    hand_hit: float | None = None
    not_served: NotServed | None = None  # why its stored parameters cannot serve

    @property
    def serves(self) -> bool:
        return self.active and self.ranker is not None and self.not_served is None
