"""The learned ranking stage on synthetic feedback: the cause of issue 30 (position-biased
feedback taught "lower is better", applied to the whole candidate list), the judged
prefix and window that keep it out, the activation rule judged on replayed orders (too
little, one-sided, losing, worse at the top or at recall, winning), the stored
parameters, that the stage only reorders what the pipeline found, within the scopes it was
asked for, the serving check that switches a model off, and (through the real service)
that a stored model fitted on other features never serves."""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from retrieval_fakes import (
    CONTRACT,
    FACTS_A,
    NOW,
    SCOPE,
    SCOPE_A,
    FakeEmbedder,
    fact,
    fake_knowledge,
    harness,
    keys,
)

from vera.commands import rank as rank_cli
from vera.config import RetrievalSettings, Settings
from vera.db.pool import open_service_database
from vera.errors import InvalidInput, UnsupportedVersion
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.retrieval import server
from vera.services.retrieval.domain import Filters, Result, RetrievalMode
from vera.services.retrieval.pipeline import contract
from vera.services.retrieval.pipeline.retriever import Retriever
from vera.services.retrieval.rank import learned as learned_rank
from vera.services.retrieval.rank.learned import (
    FEATURES,
    ActiveModels,
    FeedbackRow,
    Figures,
    FitOutcome,
    FitPolicy,
    FitReport,
    LinearRanker,
    RankRecord,
    Replay,
    ServedModel,
)
from vera.services.retrieval.rank.lifecycle import Ranking, RankingOptions
from vera.services.retrieval.rank.store import RankStore

POLICY = FitPolicy(min_rows=20, min_packs=5, min_gain=0.01)
PROJECT = "00000000-0000-4000-8000-0000000000cc"


def pack_rows(
    packs: int, up_at: int, *, size: int = 5, marked: bool = True, seed: int = 7
) -> list[FeedbackRow]:
    """``packs`` packs of ``size`` results, every one judged; the ``up`` is the one at
    hand-set rank ``up_at`` and (when ``marked``) the only result whose subject the query
    names. Two packs per question; a result is fact ``<question>-<rank>``."""
    rng = random.Random(seed)
    rows = []
    for p in range(packs):
        question = f"q-{p % (packs // 2 or 1)}"
        for rank in range(1, size + 1):
            up = rank == up_at
            signals = {
                "dense": rng.uniform(0.3, 0.6),
                "lexical": rng.uniform(0.0, 1.0),
                "fused": 1.0 - rank * 0.1,
                "final": 1.0 - rank * 0.1,
                "boost": 1.0,
                "trust_tier": 1.0,
                "authority": 0.8,
                "entity": 1.0 if (up and marked) else 0.0,
                "hand_rank": float(rank),
            }
            rows.append(
                FeedbackRow(
                    f"pack-{p}",
                    question,
                    rank,
                    "up" if up else "down",
                    signals,
                    query=f"question {question}",
                    scope_id=PROJECT,
                    fact_key=f"{question}-{rank}",
                )
            )
    return rows


def result(key: str, signals: dict[str, float]) -> Result:
    return Result(fact(key), signals.get("final", 0.0), 0, f"{key}-v1", dict(signals))


def candidates_of(rows: list[FeedbackRow]) -> dict[tuple[str, str], list[Result]]:
    """(scope, query) -> its candidates in the hand-set order, as the serving path gives
    them: one result per fact the question's packs showed (their signals)."""
    found: dict[tuple[str, str], dict[str, Result]] = {}
    for row in rows:
        found.setdefault((row.scope_id, row.query), {}).setdefault(
            row.fact_key, result(row.fact_key, dict(row.signals))
        )
    return {
        key: sorted(results.values(), key=lambda r: learned_rank.hand_rank(r.signals))
        for key, results in found.items()
    }


def replays_of(rows: list[FeedbackRow]) -> list[Replay]:
    up = learned_rank.labels(rows)
    digests = {(r.scope_id, r.query): r.query_digest for r in rows}
    return [
        Replay(digests[key], tuple(found), up[(key[0], digests[key])])
        for key, found in candidates_of(rows).items()
    ]


def fit(rows: list[FeedbackRow], policy: FitPolicy = POLICY) -> FitReport:
    return learned_rank.fit(rows, replays_of(rows), policy)


def test_too_little_feedback_leaves_the_hand_set_ranking():
    report = fit(pack_rows(2, up_at=3))
    assert report.outcome is FitOutcome.TOO_LITTLE_FEEDBACK
    assert (report.training_rows, report.evaluated_packs) == (10, 2)
    assert report.ranker is None and not report.activate


def test_one_sided_feedback_leaves_the_hand_set_ranking():
    rows = [replace(r, signal="up") for r in pack_rows(10, up_at=3)]
    report = fit(rows)
    assert report.outcome is FitOutcome.ONE_SIDED_FEEDBACK
    assert report.ranker is None and not report.activate


def test_a_model_that_cannot_beat_the_hand_set_order_is_not_activated():
    # The hand-set order already puts every accepted result first: nothing to gain.
    report = fit(pack_rows(20, up_at=1, marked=False))
    assert report.outcome is FitOutcome.NOT_BETTER
    assert report.hand.mrr == pytest.approx(1.0)
    assert report.model.mrr <= report.hand.mrr + POLICY.min_gain
    assert report.ranker is not None and not report.activate


def test_a_model_that_wins_on_the_replayed_orders_is_activated():
    report = fit(pack_rows(20, up_at=4))
    assert report.outcome is FitOutcome.ACTIVATED and report.activate
    assert report.hand.mrr == pytest.approx(0.25)  # the up is 4th of the 5 candidates
    assert report.model.mrr > report.hand.mrr + POLICY.min_gain
    assert (report.training_rows, report.training_queries, report.evaluated_packs) == (100, 10, 20)
    assert report.model.queries == report.hand.queries == 10  # each question once
    assert report.model.hit == report.hand.hit == pytest.approx(1.0)
    assert report.ranker is not None and report.ranker.window == 5  # the judged depth


# --- the cause of issue 30, and what keeps it out -----------------------------------------


def biased_feedback(questions: int = 40, shown: int = 10, pool: int = 30, seed: int = 3):
    """What the issue's careful user did, on candidates whose scores carry no more than
    the hand-set order does: each question has 30 candidates, 3 of them relevant (placed
    anywhere in the top 20); a pack shows the top 10, and the user marks ``up`` every
    relevant result shown and ``down`` the non-relevant among the top 3 only."""
    rng = random.Random(seed)
    rows = []
    candidates: dict[tuple[str, str], list[Result]] = {}
    for q in range(questions):
        relevant = set(rng.sample(range(1, 21), 3))
        results = []
        for rank in range(1, pool + 1):
            signals = {
                "dense": rng.uniform(0.3, 0.6),
                "lexical": rng.uniform(0.0, 1.0),
                "fused": 1.0 - rank * 0.02,
                "final": 1.0 - rank * 0.02,
                "boost": 1.0,
                "trust_tier": 1.0,
                "authority": 0.8,
                "hand_rank": float(rank),
            }
            if rank <= 20:  # the rerank stage's short list
                signals["rerank"] = 1.0 - rank * 0.03
            key = f"q{q}-f{rank}"
            results.append(result(key, signals))
            if rank > shown or (rank not in relevant and rank > 3):
                continue
            signal = "up" if rank in relevant else "down"
            rows.append(
                FeedbackRow(
                    f"pack-{q}", f"d{q}", rank, signal, signals, None, f"question {q}", PROJECT, key
                )
            )
        candidates[(PROJECT, f"question {q}")] = results
    up = learned_rank.labels(rows)
    replays = [
        Replay(f"d{q}", tuple(candidates[(PROJECT, f"question {q}")]), up[(PROJECT, f"d{q}")])
        for q in range(questions)
        if (PROJECT, f"d{q}") in up
    ]
    return rows, replays, candidates


def test_the_cause_pairs_from_position_biased_feedback_teach_lower_is_better():
    """The stage as it was: every (up, down) pair of a pack, a model free to reorder the
    whole candidate list. The pairs say "lower in the hand-set order is better" (every
    ``down`` sits in the top 3, ``up``s reach rank 10), so the model lifts the candidates
    nobody judged, from below the page, into the top: hit@5 and recall@10 drop."""
    from sklearn.linear_model import LogisticRegression

    rows, replays, _ = biased_feedback()
    matrix = np.array([learned_rank.features(r.signals) for r in rows])
    x, y = learned_rank.pairs(matrix, rows, range(len(rows)))
    old = LogisticRegression(fit_intercept=False).fit(x, y)
    assert old.coef_[0][FEATURES.index("final")] < 0  # the hand-set score, learned backwards
    whole_list = LinearRanker(
        "old",
        FEATURES,
        (0.0,) * len(FEATURES),
        (1.0,) * len(FEATURES),
        tuple(old.coef_[0]),
        0.0,
        window=30,
    )
    served = learned_rank.judge(replays, lambda r: learned_rank.reorder(r.candidates, whole_list))
    hand = learned_rank.judge(replays, lambda r: r.candidates)
    assert served.hit < hand.hit and served.recall < hand.recall
    promoted = [
        r
        for rp in replays
        for r in learned_rank.reorder(rp.candidates, whole_list)[:10]
        if r.signals["hand_rank"] > 10
    ]
    assert promoted  # results from below the page the user saw, on the page
    assert learned_rank.verdict(served, hand, 0.0) is FitOutcome.WORSE_AT_TOP


def test_the_fix_learns_only_inside_the_judged_prefix_and_never_makes_it_worse():
    rows, replays, _ = biased_feedback()
    judged = learned_rank.judged_prefix(rows, range(len(rows)))
    assert judged and max(rows[i].rank for i in judged) < 10
    report = learned_rank.fit(rows, replays, FitPolicy(min_rows=20, min_packs=5, min_gain=0.0))
    assert report.ranker is not None and "hand_rank" not in FEATURES
    window = report.ranker.window
    assert window == max(rows[i].rank for i in judged)
    # It reorders the top of the hand-set order only: below its window nothing moves.
    for replay in replays:
        served = learned_rank.reorder(replay.candidates, report.ranker)
        assert served[window:] == list(replay.candidates[window:])
        assert {r.fact.fact_key for r in served[:window]} == {
            r.fact.fact_key for r in replay.candidates[:window]
        }
    # And whatever the rule decides, it never serves an order worse at the top or recall.
    if report.activate:
        assert report.model.hit >= report.hand.hit and report.model.recall >= report.hand.recall
    else:
        assert report.outcome in (
            FitOutcome.NOT_BETTER,
            FitOutcome.WORSE_AT_TOP,
            FitOutcome.WORSE_AT_RECALL,
        )


def test_the_judged_prefix_stops_at_the_first_result_without_feedback():
    signals = {"final": 0.5, "hand_rank": 1.0}
    rows = [
        FeedbackRow("p", "q", rank, signal, signals)
        for rank, signal in ((1, "down"), (2, "up"), (3, "down"), (5, "up"), (7, "up"))
    ]
    assert [rows[i].rank for i in learned_rank.judged_prefix(rows, range(5))] == [1, 2, 3]


def test_judge_scores_the_served_top_on_up_labels_only():
    found = tuple(result(k, {"hand_rank": float(n)}) for n, k in enumerate("abcdefghijkl", 1))
    replay = Replay("q", found, frozenset({"c", "k"}))  # k is 11th: outside the cut
    hand = learned_rank.judge([replay], lambda r: r.candidates)
    assert (hand.queries, hand.hit, hand.recall, hand.mrr) == (1, 1.0, 0.5, pytest.approx(1 / 3))
    # An order that drops c below the cut and brings k to 6th: a down/unjudged first
    # result is no win, the hit is lost, recall is unchanged.
    moved = learned_rank.judge([replay], lambda r: [*r.candidates[3:8], r.candidates[10]])
    assert (moved.hit, moved.recall, moved.mrr) == (0.0, 0.5, pytest.approx(1 / 6))
    assert learned_rank.judge([Replay("q", found, frozenset())], lambda r: found) == Figures()


def test_the_rule_refuses_worse_at_hit_or_recall_and_wants_a_gain_in_mrr():
    hand = Figures(10, 0.8, 0.6, 0.5)
    verdict = learned_rank.verdict
    assert verdict(Figures(10, 0.7, 0.9, 0.9), hand, 0.01) is FitOutcome.WORSE_AT_TOP
    assert verdict(Figures(10, 0.8, 0.5, 0.9), hand, 0.01) is FitOutcome.WORSE_AT_RECALL
    assert verdict(Figures(10, 0.8, 0.6, 0.505), hand, 0.01) is FitOutcome.NOT_BETTER
    assert verdict(Figures(10, 0.8, 0.6, 0.52), hand, 0.01) is FitOutcome.ACTIVATED


def test_the_serving_check_rule_is_a_margin_on_any_figure():
    hand = Figures(30, 0.8, 0.6, 0.5)
    assert not learned_rank.fell_behind(Figures(30, 0.79, 0.59, 0.49), hand, 0.02)
    assert learned_rank.fell_behind(Figures(30, 0.8, 0.6, 0.47), hand, 0.02)
    assert learned_rank.fell_behind(Figures(30, 0.7, 0.6, 0.6), hand, 0.02)


def test_rows_without_a_signal_vector_are_not_training_data():
    blank = [replace(r, signals={}) for r in pack_rows(20, up_at=4)]
    report = fit(blank)
    assert report.outcome is FitOutcome.TOO_LITTLE_FEEDBACK and report.training_rows == 0


def test_parameters_round_trip_and_foreign_features_are_refused():
    ranker = fit(pack_rows(20, up_at=4)).ranker
    assert ranker is not None
    again = LinearRanker.from_parameters(ranker.model_id, ranker.parameters())
    assert again == ranker
    signals = pack_rows(1, up_at=4)[0].signals
    assert again.score(signals) == pytest.approx(ranker.score(signals))
    assert 0.0 < again.score(signals) < 1.0
    foreign = {**ranker.parameters(), "features": [*FEATURES, "hand_rank_inverse"]}
    with pytest.raises(ValueError):
        LinearRanker.from_parameters(ranker.model_id, foreign)
    # A model from before the window (free to reorder every candidate) never serves.
    unbounded = {k: v for k, v in ranker.parameters().items() if k != "window"}
    with pytest.raises(ValueError):
        LinearRanker.from_parameters(ranker.model_id, unbounded)


def learned_retriever(h, models: ActiveModels, embedder) -> Retriever:
    """The harness's pipeline with ``models`` as its learned ranking stage."""
    return Retriever(
        embedder,
        h.vectors,
        h.lexical,
        h.facts,
        candidate_pool=50,
        clock=lambda: NOW,
        assembler_version=CONTRACT,
        learned=models,
    )


def _prefers_authority(model_id: str = "m-1") -> LinearRanker:
    coef = tuple(5.0 if name == "authority" else 0.0 for name in FEATURES)
    ones = tuple(1.0 for _ in FEATURES)
    zeros = tuple(0.0 for _ in FEATURES)
    return LinearRanker(model_id, FEATURES, zeros, ones, coef, 0.0)


def test_a_project_model_serves_only_that_project():
    project, deployment = (
        ServedModel(_prefers_authority("p"), "v-p"),
        ServedModel(_prefers_authority("d"), "v-d"),
    )
    models = ActiveModels({"p1": project, None: deployment})
    assert models.select(["p1"]) is project
    assert models.select(["p1", "p2"]) is deployment
    assert models.select(["p2"]) is deployment
    assert ActiveModels({"p1": project}).select(["p2"]) is None


async def test_the_stage_only_reorders_what_the_pipeline_found():
    facts = [fact("a"), fact("b"), fact("c", authority=0.95)]
    h = harness(facts, dense={"a": 0.9, "b": 0.6, "c": 0.4})
    hand = await h.retriever.search([SCOPE], "question", 10, Filters())
    assert keys(hand) == ["a", "b", "c"]
    assert hand.assembler_version == CONTRACT

    models = ActiveModels()
    retriever = learned_retriever(h, models, FakeEmbedder())
    models.by_scope = {None: ServedModel(_prefers_authority(), "assembler-learned")}
    h.facts.calls.clear()
    outcome = await retriever.search([SCOPE], "question", 10, Filters())
    assert outcome.assembler_version == "assembler-learned"
    # c has the highest authority, all the model weighs: it rises; nothing added, nothing
    # dropped, a and b keep their hand-set order.
    assert keys(outcome) == ["c", "a", "b"]
    assert sorted(keys(outcome)) == sorted(keys(hand))
    assert [r.position for r in outcome.results] == [1, 2, 3]
    assert [r.signals["hand_rank"] for r in outcome.results] == [3.0, 1.0, 2.0]
    assert all(r.score == r.signals["learned"] for r in outcome.results)
    # Only facts of the asked scope were re-read, as without the model.
    assert {scope for call in h.facts.calls for scope in call[0]} == {SCOPE}

    models.by_scope = {}
    back = await retriever.search([SCOPE], "question", 10, Filters())
    assert keys(back) == keys(hand) and back.assembler_version == CONTRACT


class DownEmbedder(FakeEmbedder):
    async def embed(self, texts):
        raise RuntimeError("the model is gone")


async def test_a_degraded_answer_keeps_the_hand_set_order_under_a_model():
    # The model was fitted on hybrid signals; a lexical-only answer's dense signals are
    # zeros, so it is served as the hand-set pipeline ranks it, under the base contract.
    facts = [fact("a"), fact("b"), fact("c", authority=0.95)]
    h = harness(facts, lexical={"a": 3.0, "b": 2.0, "c": 1.0})
    models = ActiveModels({None: ServedModel(_prefers_authority(), "assembler-learned")})
    retriever = learned_retriever(h, models, DownEmbedder())
    outcome = await retriever.search([SCOPE], "question", 10, Filters())
    assert outcome.retrieval_mode is RetrievalMode.LEXICAL_ONLY
    assert keys(outcome) == ["a", "b", "c"]
    assert outcome.assembler_version == CONTRACT
    assert all("learned" not in r.signals for r in outcome.results)


class MemoryStore:
    """ranking.ModelStore in memory (the PostgreSQL one is rank_store, tested for real in
    tests/isolation/test_learned_rank_stack.py)."""

    def __init__(self) -> None:
        self.records: list[RankRecord] = []
        self.bumps = 0

    async def record_fit(self, scope_id, report, newest_feedback_at):
        if report.activate:
            self.records = [
                replace(r, active=False) if r.scope_id == scope_id else r for r in self.records
            ]
            self.bumps += 1
        record = RankRecord(
            model_id=report.ranker.model_id if report.ranker else f"m-{len(self.records)}",
            scope_id=scope_id,
            outcome=report.outcome,
            active=report.activate,
            training_rows=report.training_rows,
            training_queries=report.training_queries,
            evaluated_packs=report.evaluated_packs,
            model_figure=report.model.mrr,
            hand_figure=report.hand.mrr,
            trained_at=datetime.now(UTC),
            newest_feedback_at=newest_feedback_at,
            ranker=report.ranker,
            watched_since=datetime.now(UTC) if report.activate else None,
        )
        self.records.append(record)
        return record

    async def deactivate(self, scope_id):
        hit = next((r for r in self.records if r.active and r.scope_id == scope_id), None)
        if hit is not None:
            self.records = [replace(r, active=False) if r is hit else r for r in self.records]
            self.bumps += 1
        return hit

    async def active(self):
        return [r for r in self.records if r.active]

    async def last_fit(self, scope_id):
        return next((r for r in reversed(self.records) if r.scope_id == scope_id), None)

    async def generation(self):
        return self.bumps

    async def activated_ids(self, scope_id):
        return [
            r.model_id
            for r in self.records
            if r.outcome is FitOutcome.ACTIVATED and r.scope_id in (None, scope_id)
        ]

    async def model(self, model_id):
        return next((r for r in self.records if r.model_id == model_id), None)

    async def switch_off(self, model_id, guard):
        hit = next((r for r in self.records if r.active and r.model_id == model_id), None)
        if hit is None:
            return None
        off = replace(hit, active=False, switched_off=guard)
        self.records = [off if r is hit else r for r in self.records]
        self.bumps += 1
        return off

    async def enable(self, scope_id):
        off = await self.last_switched_off(scope_id)
        if off is None:
            return None
        back = replace(off, active=True, switched_off=None, watched_since=datetime.now(UTC))
        self.records = [
            back if r is off else replace(r, active=False) if r.scope_id == scope_id else r
            for r in self.records
        ]
        self.bumps += 1
        return back

    async def last_switched_off(self, scope_id):
        return max(
            (r for r in self.records if r.scope_id == scope_id and r.switched_off),
            key=lambda r: r.switched_off.checked_at,
            default=None,
        )


class ArrivingFeedback:
    """Feedback rows that arrive over time, newest first, each with its time."""

    def __init__(self) -> None:
        self.rows: list[FeedbackRow] = []

    def arrive(self, rows: list[FeedbackRow]) -> None:
        start = datetime.now(UTC)
        self.rows = [
            replace(r, recorded_at=start + timedelta(milliseconds=n)) for n, r in enumerate(rows)
        ][::-1] + self.rows

    async def newest(self, scope_id, recorded_after, limit):
        return [r for r in self.rows if recorded_after is None or r.recorded_at >= recorded_after][
            :limit
        ]


class ServingPath:
    """ranking.ServingPath over the candidates the feedback's packs showed (the real one
    is pipeline.Retriever, exercised through the stack in tests/isolation); ``candidates``
    may be swapped to what the index holds later."""

    def __init__(self, feedback: ArrivingFeedback) -> None:
        self.feedback = feedback
        self.replayed = 0

    async def candidates(self, scope_id, query):
        self.replayed += 1
        return candidates_of(self.feedback.rows).get((scope_id, query))


def ranking_over(store, feedback, models, path=None, **options) -> Ranking:
    defaults = dict(
        policy=POLICY,
        max_training_rows=1000,
        poll_seconds=0.01,
        auto_fit_new_feedback=60,
        auto_fit_check_seconds=0.01,
        replay_queries=500,
        guard_check_seconds=0,
        guard_min_queries=5,
        guard_max_queries=100,
        guard_margin=0.02,
    )
    return Ranking(
        store,
        feedback,
        path or ServingPath(feedback),
        models,
        RankingOptions(**{**defaults, **options}),
        version_for=lambda model_id: f"v-{model_id}",
    )


async def wait_for(condition, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_the_background_fit_runs_once_enough_new_feedback_arrived():
    store, feedback, models = MemoryStore(), ArrivingFeedback(), ActiveModels()
    ranking = ranking_over(store, feedback, models)
    loop = asyncio.create_task(ranking.auto_fit())
    try:
        feedback.arrive(pack_rows(10, up_at=4)[:50])  # below the threshold of 60
        await asyncio.sleep(0.1)
        assert store.records == []
        feedback.arrive(pack_rows(20, up_at=4, seed=3))  # now 150 rows
        await wait_for(lambda: len(store.records) == 1)
        fitted = store.records[0]
        assert fitted.outcome is FitOutcome.ACTIVATED and fitted.training_rows == 150
        assert models.select([]) is not None  # serves at once
        assert ranking.served_version([]) == f"v-{fitted.model_id}"
        # Nothing new since: no second fit.
        await asyncio.sleep(0.1)
        assert len(store.records) == 1
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


async def test_the_background_fit_runs_only_in_the_replica_in_charge():
    store, feedback = MemoryStore(), ArrivingFeedback()
    in_charge = False
    loop = asyncio.create_task(
        ranking_over(store, feedback, ActiveModels()).auto_fit(lambda: in_charge)
    )
    try:
        feedback.arrive(pack_rows(20, up_at=4))  # 150 rows, over the threshold of 60
        await asyncio.sleep(0.1)
        assert store.records == []  # a follower leaves the fit to the writer
        in_charge = True
        await wait_for(lambda: len(store.records) == 1)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


async def test_the_background_fit_is_off_at_zero():
    store, feedback = MemoryStore(), ArrivingFeedback()
    feedback.arrive(pack_rows(20, up_at=4))
    await ranking_over(store, feedback, ActiveModels(), auto_fit_new_feedback=0).auto_fit()
    assert store.records == []


async def test_off_and_a_change_elsewhere_reach_the_serving_set():
    store, feedback, models = MemoryStore(), ArrivingFeedback(), ActiveModels()
    ranking = ranking_over(store, feedback, models)
    feedback.arrive(pack_rows(20, up_at=4))
    fitted = await ranking.fit(None, 0, None)
    assert models.select([]) is not None
    assert (await ranking.off(None)).model_id == fitted.model_id
    assert models.select([]) is None and ranking.served_version([]) == "v-None"
    # Another process activates a model: the watch loop swaps it in.
    watch = asyncio.create_task(ranking.watch())
    try:
        other = replace(fitted, model_id="other", active=True)
        store.records.append(other)
        store.bumps += 1
        await wait_for(lambda: models.select([]) is not None)
        assert ranking.served_version([]) == "v-other"
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    with pytest.raises(InvalidInput) as err:
        await ranking.fit(None, 1001, None)
    assert err.value.field == "max_rows"


async def test_a_replay_ranks_with_the_model_its_version_names_or_fails_closed():
    store, feedback, models = MemoryStore(), ArrivingFeedback(), ActiveModels()
    ranking = ranking_over(store, feedback, models)
    feedback.arrive(pack_rows(20, up_at=4))
    first = await ranking.fit(None, 0, None)
    project = "00000000-0000-4000-8000-0000000000aa"
    own = await ranking.fit(project, 0, None)
    # A newer deployment-wide model replaces the first; then the project's is turned off.
    second = await ranking.fit(None, 0, None)
    await ranking.off(project)
    assert ranking.served_version([project]) == f"v-{second.model_id}"

    pinned = await ranking.pinned([project], f"v-{first.model_id}")
    assert pinned.select([project]).ranker == first.ranker
    assert (await ranking.pinned([project], f"v-{own.model_id}")).select([]).ranker == own.ranker
    assert (await ranking.pinned([project], "v-None")).select([project]) is None  # hand-set
    now = (await ranking.pinned([project], f"v-{second.model_id}")).select([])
    assert now is models.select([project])
    # A project's model never ranks another project, nor a request across projects.
    for scopes in (["00000000-0000-4000-8000-0000000000bb"], [project, "other"]):
        with pytest.raises(UnsupportedVersion):
            await ranking.pinned(scopes, f"v-{own.model_id}")
    # A model gone from storage fails closed even after it was loaded once; so do one
    # stored without servable parameters and a version no model here has.
    store.records = [r for r in store.records if r.model_id != first.model_id]
    with pytest.raises(UnsupportedVersion):
        await ranking.pinned([project], f"v-{first.model_id}")
    store.records = [
        replace(r, ranker=None) if r.model_id == own.model_id else r for r in store.records
    ]
    fresh = ranking_over(store, feedback, ActiveModels())
    with pytest.raises(UnsupportedVersion):
        await fresh.pinned([project], f"v-{own.model_id}")
    with pytest.raises(UnsupportedVersion):
        await ranking.pinned([project], "v-unknown")


def test_the_contract_names_the_serving_model():
    settings = RetrievalSettings()
    hand = contract.assembler_version(settings)
    one = contract.assembler_version(settings, rank_model="model-1")
    two = contract.assembler_version(settings, rank_model="model-2")
    assert len({hand, one, two}) == 3
    assert all(len(v) <= 64 for v in (hand, one, two))
    # Only the policy part moves: embedding and index are what they were.
    assert one.split(";")[1:] == hand.split(";")[1:]
    assert contract.assembler_version(settings, rank_model=None) == hand


async def test_a_stored_model_fitted_on_other_features_never_serves_and_status_says_why(
    pg_dsn, tmp_path
):
    """An older release activated a model over another feature set; this release starts
    with it in storage: the hand-set ranking serves, and status says why."""
    _, fake = await fake_knowledge((SCOPE_A, FACTS_A))
    settings = Settings(
        data_dir=tmp_path,
        database={"dsn": pg_dsn},
        services={"knowledge": f"127.0.0.1:{fake.port}"},
        retrieval={"qdrant_url": ":memory:", "index_poll_seconds": 0.02},
    )
    older = (*FEATURES, "hand_rank_inverse")  # the release before issue 30
    n = len(older)
    stale = LinearRanker(
        "00000000-0000-4000-8000-00000000000a", older, (0.0,) * n, (1.0,) * n, (1.0,) * n, 0.0, 30
    )
    pool = await open_service_database(settings, server.SCHEMA, server.PACKAGE)
    try:
        stored = await RankStore(pool).record_fit(
            None, FitReport(FitOutcome.ACTIVATED, 50, 10, 10, stale), None
        )
    finally:
        await pool.close()
    assert stored.active and not stored.serves
    assert stored.not_served is learned_rank.NotServed.OTHER_FEATURES

    # The embedder is not what this is about: the lexical leg finds the facts.
    hosted = await server.create(settings, "127.0.0.1:0", embedder=FakeEmbedder())
    await hosted.running.server.start()
    address = f"127.0.0.1:{hosted.running.port}"
    channel = open_channel(address, 30.0)
    hand_version = contract.assembler_version(settings.retrieval)
    try:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        status = await stub.GetRankStatus(retrieval_pb2.GetRankStatusRequest())
        assert not status.HasField("active")
        assert status.assembler_version == hand_version
        assert status.unservable.model_id == stale.model_id
        assert not status.unservable.active and status.unservable.assembler_version == ""
        reason = retrieval_pb2.RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES
        assert status.unservable.not_served_reason == reason
        assert status.last_fit.not_served_reason == reason

        # The serving path: the hand-set ranking, under its own contract.
        deadline = asyncio.get_running_loop().time() + 20
        while not (
            found := await stub.Search(
                retrieval_pb2.SearchRequest(scope_ids=[SCOPE_A], query="who owns payments", limit=5)
            )
        ).results:
            assert asyncio.get_running_loop().time() < deadline, "nothing indexed"
            await asyncio.sleep(0.05)
        assert found.assembler_version == hand_version
        assert all("learned" not in r.signals for r in found.results)
        # A replay pinned to it (as if a snapshot had been taken while it served) cannot
        # rank with it: it fails closed.
        with pytest.raises(UnsupportedVersion):
            await stub.Search(
                retrieval_pb2.SearchRequest(
                    scope_ids=[SCOPE_A],
                    query="who owns payments",
                    limit=5,
                    assembler_version=contract.assembler_version(
                        settings.retrieval, rank_model=stale.model_id
                    ),
                )
            )
        pinned_hand = await stub.Search(
            retrieval_pb2.SearchRequest(
                scope_ids=[SCOPE_A],
                query="who owns payments",
                limit=5,
                assembler_version=hand_version,
            )
        )
        assert [r.fact.fact_key for r in pinned_hand.results] == [
            r.fact.fact_key for r in found.results
        ]

        # What `vera rank status` prints from it: the code, not a serving model.
        shown = await rank_cli.status(
            Settings(services={"retrieval": address, "identity": address})
        )
        assert shown["active"] is None
        assert shown["unservable"]["not_served"] == "fitted_on_other_features"
        assert "fitted_on_other_features" in rank_cli._summary("status", shown)

        # `vera rank off` still clears it.
        off = await stub.DisableRankModel(retrieval_pb2.DisableRankModelRequest())
        assert off.disabled.model_id == stale.model_id
        again = await stub.GetRankStatus(retrieval_pb2.GetRankStatusRequest())
        assert not again.HasField("unservable") and not again.HasField("active")
    finally:
        await channel.close()
        await hosted.running.stop(grace=1.0)
        await hosted.aclose()
        await fake.stop(grace=1.0)


async def test_a_model_that_falls_behind_on_later_feedback_is_switched_off_and_can_return():
    store, feedback, models = MemoryStore(), ArrivingFeedback(), ActiveModels()
    ranking = ranking_over(store, feedback, models)
    feedback.arrive(pack_rows(20, up_at=4))  # "the named result is the one": it learns that
    fitted = await ranking.fit(None, 0, None)
    assert fitted.outcome is FitOutcome.ACTIVATED and models.select([]) is not None
    # Nothing new since it started serving: nothing to compare, nothing changes.
    feedback.rows = [
        replace(r, recorded_at=datetime.now(UTC) - timedelta(days=1)) for r in feedback.rows
    ]
    assert await ranking.check_serving() == []

    # Later questions where the named result is wrong and the first is right: the model
    # now puts a down first; the hand-set order keeps the up first.
    later = [
        replace(
            r,
            query_digest=f"later-{r.query_digest}",
            query=f"later {r.query}",
            fact_key=f"later-{r.fact_key}",
            pack_id=f"later-{r.pack_id}",
            signal="up" if r.rank == 1 else "down",
            signals={**r.signals, "entity": 1.0 if r.rank == 3 else 0.0},
        )
        for r in pack_rows(20, up_at=1, seed=9)
    ]
    feedback.arrive(later)
    switched = await ranking.check_serving()
    assert [r.model_id for r in switched] == [fitted.model_id]
    guard = switched[0].switched_off
    assert guard is not None and guard.model.queries == guard.hand.queries == 10
    assert guard.model.mrr < guard.hand.mrr - 0.02
    assert models.select([]) is None and ranking.served_version([]) == "v-None"
    status = await ranking.status(None)
    assert status.serving is None and status.switched_off.model_id == fitted.model_id

    # The operator overrules it: it serves again, watched from now on (the feedback that
    # switched it off is behind it, so the next check leaves it serving).
    feedback.rows = [
        replace(r, recorded_at=r.recorded_at - timedelta(seconds=1)) for r in feedback.rows
    ]
    back = await ranking.on(None)
    assert back is not None and back.model_id == fitted.model_id and back.serves
    assert models.select([]) is not None
    assert await ranking.check_serving() == []
    assert (await ranking.status(None)).serving.model_id == fitted.model_id


async def test_the_serving_check_runs_in_the_background_only_when_asked():
    store, feedback = MemoryStore(), ArrivingFeedback()
    ranking = ranking_over(store, feedback, ActiveModels(), guard_check_seconds=0)
    await asyncio.wait_for(ranking.guard(), 1.0)  # returns at once: off
