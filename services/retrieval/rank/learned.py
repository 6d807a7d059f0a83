"""The learned ranking stage: features -> fit -> judged as it serves -> activation.

A model sees only numbers the pipeline computed itself (each result's signal vector, as the
gateway copied it from the persisted pack into a feedback row), never text. It is logistic
regression over standardized features, trained pairwise on result-level up/down feedback
(each ``up`` against each ``down`` of the same pack), and it may only reorder the top
``window`` results of the hand-set order: it adds nothing, drops nothing, and never moves a
result from deeper than any comparison it learned from.

Position bias is kept out, not learned. People judge what they were shown, top first: a
careful one marks every result that helps and the few top ones that do not, so below the
top nearly every label is an ``up`` because of where the result sat, not what it was. A
model fitted on all of those pairs learns "lower is better" and, applied to the full
candidate list, lifts the buried candidates nobody judged to the top (what halved LoCoMo
retrieval, issue 30). So (1) no feature says where a result was shown (the hand-set rank is
not one), and (2) pairs come only from each pack's fully judged prefix (ranks 1..k, each
with feedback), where whether a result got a label does not depend on its position; the
deepest such k is the model's ``window``. Dropping the rank feature alone would not do:
every score the hand-set order sorts by carries the same bias.

Activation rule (``verdict``, the one home of it), judged the way the model serves: every
query behind the feedback was replayed through the serving path (ranking.Ranking: the same
candidates, the hand-set order the stage receives), and out of fold (folds grouped by
query, so a question never sits on both sides) its fold's model reorders them as ``reorder``
does. Both orders' top ``CUT`` are scored on that query's labels: a result with an ``up`` is
relevant, anything else (a ``down``, or never judged) is not, so an unknown never counts as
a win. hit@5, recall@10 and MRR@10 are averaged over the queries with an ``up``. The model
is activated only when it is not worse at hit@5 and at recall@10 and beats MRR@10 by more
than ``min_gain``. Imports no gRPC, driver or storage code; ``fit`` is CPU work, run off
the event loop.
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

from vera.services.retrieval.domain import Result

# The figure the activation rule ranks by, judged by replaying (status shows it); fits
# recorded before replay judged on the labelled packs only and say "mrr".
METRIC = "replay_mrr@10"
# The top a user reads first: "not worse" is judged on hit@HIT_AT and recall@CUT.
HIT_AT = 5
# How many results of a replayed order are scored (the default limit of a pack).
CUT = 10
# Figures are means of fractions: equal within this are equal.
_TIE = 1e-9
# The pipeline's signal names (pipeline/retriever.py) the features are built from; ``reranked`` says
# whether the rerank stage scored the result. Nothing here says where it was shown.
FEATURES: tuple[str, ...] = (
    "dense",
    "lexical",
    "fused",
    "rerank",
    "reranked",
    "dense_context",
    "entity",
    "time",
    "boost",
    "trust_tier",
    "authority",
    "stale",
    "final",
)
MAX_FOLDS = 5
_REGULARIZATION = 1.0


class FitOutcome(enum.StrEnum):
    ACTIVATED = "activated"
    TOO_LITTLE_FEEDBACK = "too_little_feedback"
    ONE_SIDED_FEEDBACK = "one_sided_feedback"
    NOT_BETTER = "not_better"
    WORSE_AT_TOP = "worse_at_top"
    WORSE_AT_RECALL = "worse_at_recall"


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
    the result's rank in the pack as shown, ``up``/``down``, and the result's signal
    vector; ``query``, ``scope_id`` and ``fact_key`` let the fit replay the query."""

    pack_id: str
    query_digest: str
    rank: int
    signal: str
    signals: Mapping[str, float]
    recorded_at: datetime | None = None
    query: str = ""
    scope_id: str = ""
    fact_key: str = ""


@dataclass(frozen=True)
class FitPolicy:
    min_rows: int = 50
    min_packs: int = 10
    min_gain: float = 0.01


def hand_rank(signals: Mapping[str, float]) -> float:
    """The result's position in the hand-set order (recorded by the pipeline)."""
    value = signals.get("hand_rank", 0.0)
    return float(value) if value > 0 else math.inf


def features(signals: Mapping[str, float]) -> list[float]:
    derived = {"reranked": 1.0 if "rerank" in signals else 0.0}
    out = []
    for name in FEATURES:
        value = derived[name] if name in derived else signals.get(name, 0.0)
        out.append(float(value) if math.isfinite(value) else 0.0)
    return out


@dataclass(frozen=True)
class LinearRanker:
    """A fitted model: standardization and logistic-regression weights over FEATURES, and
    the top of the hand-set order it may reorder. Plain numbers (stored as JSON, scored in
    pure Python: a few dozen products per call)."""

    model_id: str
    feature_names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    window: int = CUT

    def score(self, signals: Mapping[str, float]) -> float:
        """Probability that the result earns an ``up`` (0..1)."""
        values = features(signals)
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
            "window": self.window,
        }

    @classmethod
    def from_parameters(cls, model_id: str, parameters: Mapping[str, Any]) -> LinearRanker:
        names = tuple(parameters["features"])
        if names != FEATURES or "window" not in parameters:
            # Weights for other features (or a model free to reorder every candidate) would
            # score the wrong numbers: refuse to serve them.
            raise UnservableModel(NotServed.OTHER_FEATURES)
        return cls(
            model_id=model_id,
            feature_names=names,
            mean=tuple(float(v) for v in parameters["mean"]),
            scale=tuple(float(v) for v in parameters["scale"]),
            coef=tuple(float(v) for v in parameters["coef"]),
            intercept=float(parameters["intercept"]),
            window=int(parameters["window"]),
        )


def reorder(results: Sequence[Result], ranker: LinearRanker) -> list[Result]:
    """The stage itself: the top ``ranker.window`` of the hand-set order (``results``, each
    with its ``hand_rank``), ordered by the model's score, ties keeping the hand-set order;
    the rest stay where they were. A reordered result's score becomes the model's, and its
    ``learned`` signal says so."""
    head, tail = results[: ranker.window], results[ranker.window :]
    scored = [
        replace(
            result,
            score=(learned := ranker.score(result.signals)),
            signals={**result.signals, "learned": learned},
        )
        for result in head
    ]
    return [*sorted(scored, key=lambda r: (-r.score, hand_rank(r.signals))), *tail]


# --- judging an order as it serves ------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """One query replayed through the serving path: its candidates in the hand-set order
    (the whole list the stage reorders) and the facts its feedback marked ``up``."""

    query_digest: str
    candidates: tuple[Result, ...]
    ups: frozenset[str]


@dataclass(frozen=True)
class Figures:
    """One order's figures over the replayed queries with an ``up``, averaged per query."""

    queries: int = 0
    hit: float = 0.0  # hit@HIT_AT
    recall: float = 0.0  # recall@CUT
    mrr: float = 0.0  # MRR@CUT


def judge(replays: Sequence[Replay], order: Callable[[Replay], Sequence[Result]]) -> Figures:
    """Scores ``order(replay)[:CUT]`` of each replay with an ``up`` on its labels; a
    result not marked ``up`` is not relevant, whether it got a ``down`` or nothing."""
    hits, recalls, rrs = [], [], []
    for replay in replays:
        if not replay.ups:
            continue
        top = [r.fact.fact_key for r in order(replay)[:CUT]]
        found = [n for n, key in enumerate(top, start=1) if key in replay.ups]
        hits.append(float(bool(found) and found[0] <= HIT_AT))
        recalls.append(len(set(top) & replay.ups) / len(replay.ups))
        rrs.append(1.0 / found[0] if found else 0.0)
    if not hits:
        return Figures()
    n = len(hits)
    return Figures(n, sum(hits) / n, sum(recalls) / n, sum(rrs) / n)


def hand_set(replay: Replay) -> Sequence[Result]:
    """A replay's order with no model serving (what ``judge`` compares against)."""
    return replay.candidates


def served_by(ranker: LinearRanker) -> Callable[[Replay], Sequence[Result]]:
    """A replay's order with ``ranker`` serving it."""
    return lambda replay: reorder(replay.candidates, ranker)


def verdict(model: Figures, hand: Figures, min_gain: float) -> FitOutcome:
    """The activation rule (the module docstring): never worse at hit@5 or recall@10,
    and better on MRR@10 by more than ``min_gain``."""
    if model.hit < hand.hit - _TIE:
        return FitOutcome.WORSE_AT_TOP
    if model.recall < hand.recall - _TIE:
        return FitOutcome.WORSE_AT_RECALL
    if model.mrr <= hand.mrr + min_gain:
        return FitOutcome.NOT_BETTER
    return FitOutcome.ACTIVATED


def fell_behind(model: Figures, hand: Figures, margin: float) -> bool:
    """The serving check's rule: the model trails the hand-set order by more than
    ``margin`` at hit@5, recall@10 or MRR@10 on the same replayed queries."""
    return any(
        m < h - margin
        for m, h in ((model.hit, hand.hit), (model.recall, hand.recall), (model.mrr, hand.mrr))
    )


def labels(rows: Sequence[FeedbackRow]) -> dict[tuple[str, str], frozenset[str]]:
    """(scope, query digest) -> the facts whose newest feedback there is ``up``; ``rows``
    newest first, as a fit reads them."""
    newest: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:
        if row.fact_key:
            newest.setdefault((row.scope_id, row.query_digest), {}).setdefault(
                row.fact_key, row.signal
            )
    return {
        key: frozenset(f for f, signal in facts.items() if signal == "up")
        for key, facts in newest.items()
    }


# --- fitting --------------------------------------------------------------------------


@dataclass(frozen=True)
class FitReport:
    outcome: FitOutcome
    training_rows: int
    training_queries: int
    evaluated_packs: int
    ranker: LinearRanker | None = None  # fitted unless the feedback was too little/one-sided
    model: Figures = Figures()  # replayed out of fold
    hand: Figures = Figures()

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


def judged_prefix(rows: Sequence[FeedbackRow], idx: Sequence[int]) -> list[int]:
    """The rows (of ``idx``) in their pack's fully judged prefix: shown at ranks 1..k with
    feedback on every one of them (the module docstring says why only these)."""
    by_pack: dict[str, dict[int, int]] = {}
    for i in idx:
        by_pack.setdefault(rows[i].pack_id, {})[rows[i].rank] = i
    kept: list[int] = []
    for ranks in by_pack.values():
        depth = 0
        while depth + 1 in ranks:
            depth += 1
        kept += [ranks[r] for r in range(1, depth + 1)]
    return kept


def _standardize(matrix: Any) -> tuple[Any, Any]:
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    return mean, scale


def pairs(matrix: Any, rows: Sequence[FeedbackRow], idx: Sequence[int]) -> tuple[Any, Any]:
    """Within each pack, every (up, down) pair's feature difference among ``idx``, both
    ways round: what a pack's order depends on is how its own results compare, not each
    one's raw scale (a question whose every score is low still has a best result)."""
    by_pack: dict[str, tuple[list[int], list[int]]] = {}
    for i in idx:
        ups, downs = by_pack.setdefault(rows[i].pack_id, ([], []))
        (ups if rows[i].signal == "up" else downs).append(i)
    diffs = [matrix[u] - matrix[d] for ups, downs in by_pack.values() for u in ups for d in downs]
    if not diffs:
        return np.empty((0, matrix.shape[1])), np.empty(0)
    x = np.array(diffs)
    return np.vstack([x, -x]), np.concatenate([np.ones(len(x)), np.zeros(len(x))])


def train_ranker(
    matrix: Any, rows: Sequence[FeedbackRow], idx: Sequence[int], model_id: str
) -> LinearRanker | None:
    """Pairwise logistic regression over standardized features (a linear score, no
    intercept: only the order within a pack matters), on the judged prefixes of ``idx``;
    None without a single pair."""
    judged = judged_prefix(rows, idx)
    if not judged:
        return None
    mean, scale = _standardize(matrix[judged])
    x, y = pairs((matrix - mean) / scale, rows, judged)
    if not len(y):
        return None
    from sklearn.linear_model import LogisticRegression  # see fit()

    model = LogisticRegression(C=_REGULARIZATION, fit_intercept=False, max_iter=1000)
    model.fit(x, y)
    window = max(rows[i].rank for i in judged)
    return LinearRanker(
        model_id=model_id,
        feature_names=FEATURES,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        coef=tuple(float(v) for v in model.coef_[0]),
        intercept=0.0,
        window=window,
    )


def fit(
    rows: Sequence[FeedbackRow],
    replays: Sequence[Replay],
    policy: FitPolicy,
    new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> FitReport:
    """Trains on ``rows``, judges out of fold on ``replays`` (their queries replayed
    through the serving path) and decides whether the model may serve (the module
    docstring)."""
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

    # Imported on first use: scikit-learn takes ~1.5 s to import, which every retrieval
    # replica's start paid for a fit that runs rarely, in the background.
    matrix = np.array([features(r.signals) for r in rows], dtype=float)
    ranker = train_ranker(matrix, rows, range(len(rows)), new_id())
    judged = [r for r in replays if r.ups]
    replayed = sorted({r.query_digest for r in judged})
    if ranker is None or len(replayed) < 2:
        return FitReport(FitOutcome.TOO_LITTLE_FEEDBACK, *counts, ranker=ranker)

    folds = min(MAX_FOLDS, len(replayed))
    fold_of = {digest: n % folds for n, digest in enumerate(replayed)}
    fold_models = [
        train_ranker(
            matrix,
            rows,
            [i for i, r in enumerate(rows) if fold_of.get(r.query_digest) != fold],
            "out-of-fold",
        )
        for fold in range(folds)
    ]

    def served(replay: Replay) -> Sequence[Result]:
        model = fold_models[fold_of[replay.query_digest]]
        # No pair to learn from outside this fold: the hand-set order serves it.
        return served_by(model)(replay) if model else hand_set(replay)

    model = judge(judged, served)
    hand = judge(judged, hand_set)
    return FitReport(
        verdict(model, hand, policy.min_gain), *counts, ranker=ranker, model=model, hand=hand
    )


# --- serving ----------------------------------------------------------------------------


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
class Guard:
    """What the serving check found when it switched a model off: both orders' figures on
    the queries that received feedback after the model started serving."""

    model: Figures
    hand: Figures
    checked_at: datetime


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
    # Replay figures (None: recorded before fits were judged by replaying).
    model_recall: float | None = None
    hand_recall: float | None = None
    replayed_queries: int | None = None
    watched_since: datetime | None = None  # the serving check reads feedback after this
    switched_off: Guard | None = None  # set when the serving check turned it off

    @property
    def serves(self) -> bool:
        return self.active and self.ranker is not None and self.not_served is None
