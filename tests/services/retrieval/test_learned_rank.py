"""The learned ranking stage on synthetic feedback: the activation rule (too little,
one-sided, losing, losing at the top, winning), the stored parameters, that the stage only
reorders what the pipeline found, within the scopes it was asked for, and (through the
real service) that a stored model fitted on other features never serves."""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from test_retrieval_pipeline import CONTRACT, NOW, SCOPE, FakeEmbedder, fact, harness, keys
from test_retrieval_service import FACTS_A, SCOPE_A, fake_knowledge

from vera import rank as rank_cli
from vera.config import RetrievalSettings, Settings
from vera.db.pool import open_service_database
from vera.errors import InvalidInput, UnsupportedVersion
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.retrieval import contract, learned_rank, server
from vera.services.retrieval.learned_rank import (
    FEATURES,
    ActiveModels,
    FeedbackRow,
    FitOutcome,
    FitPolicy,
    FitReport,
    LinearRanker,
    RankRecord,
    ServedModel,
)
from vera.services.retrieval.model import Filters, RetrievalMode
from vera.services.retrieval.pipeline import Retriever
from vera.services.retrieval.rank_store import RankStore
from vera.services.retrieval.ranking import Ranking, RankingOptions

POLICY = FitPolicy(min_rows=20, min_packs=5, min_gain=0.01)


def pack_rows(
    packs: int, up_at: int, *, size: int = 5, marked: bool = True, seed: int = 7
) -> list[FeedbackRow]:
    """``packs`` packs of ``size`` results; the ``up`` is the one at hand-set rank ``up_at``
    and (when ``marked``) the only result whose subject the query names."""
    rng = random.Random(seed)
    rows = []
    for p in range(packs):
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
                    f"pack-{p}", f"q-{p % (packs // 2 or 1)}", rank, "up" if up else "down", signals
                )
            )
    return rows


def test_too_little_feedback_leaves_the_hand_set_ranking():
    report = learned_rank.fit(pack_rows(2, up_at=3), POLICY)
    assert report.outcome is FitOutcome.TOO_LITTLE_FEEDBACK
    assert (report.training_rows, report.evaluated_packs) == (10, 2)
    assert report.ranker is None and not report.activate


def test_one_sided_feedback_leaves_the_hand_set_ranking():
    rows = [
        FeedbackRow(r.pack_id, r.query_digest, r.rank, "up", r.signals)
        for r in pack_rows(10, up_at=3)
    ]
    report = learned_rank.fit(rows, POLICY)
    assert report.outcome is FitOutcome.ONE_SIDED_FEEDBACK
    assert report.ranker is None and not report.activate


def test_a_model_that_cannot_beat_the_hand_set_order_is_not_activated():
    # The hand-set order already puts every accepted result first: nothing to gain.
    report = learned_rank.fit(pack_rows(20, up_at=1, marked=False), POLICY)
    assert report.outcome is FitOutcome.NOT_BETTER
    assert report.hand_figure == pytest.approx(1.0)
    assert report.model_figure <= report.hand_figure + POLICY.min_gain
    assert report.ranker is not None and not report.activate


def test_a_model_that_wins_out_of_fold_is_activated():
    report = learned_rank.fit(pack_rows(20, up_at=4), POLICY)
    assert report.outcome is FitOutcome.ACTIVATED and report.activate
    assert report.hand_figure == pytest.approx(0.25)  # the up is 4th of 5 labelled results
    assert report.model_figure > report.hand_figure + POLICY.min_gain
    assert (report.training_rows, report.training_queries, report.evaluated_packs) == (100, 10, 20)
    assert report.model_hit == report.hand_hit == pytest.approx(1.0)  # 5 labelled: all "top"


def lifted_and_pushed_rows(lifted: int, pushed: int, plain: int) -> list[FeedbackRow]:
    """Three kinds of pack, one question each. ``lifted``: the up is 8th of 10 and the only
    result whose subject the query names; ``pushed``: the up is 5th of 6 and the 6th, a
    down, is the named one; ``plain``: the up is first. A model that learns "named first"
    lifts the first kind's up to the top (a big MRR gain) and pushes the second kind's out
    of the top five (a small MRR loss, a lost hit each)."""
    rows = []
    kinds = ["lifted"] * lifted + ["pushed"] * pushed + ["plain"] * plain
    for p, kind in enumerate(kinds):
        up_at, named, size = {"lifted": (8, 8, 10), "pushed": (5, 6, 6), "plain": (1, 0, 10)}[kind]
        for rank in range(1, size + 1):
            signals = {
                "fused": 0.5,
                "final": 0.5,
                "boost": 1.0,
                "trust_tier": 1.0,
                "authority": 0.8,
                "entity": 1.0 if rank == named else 0.0,
                "hand_rank": float(rank),
            }
            signal = "up" if rank == up_at else "down"
            rows.append(FeedbackRow(f"pack-{p}", f"q-{p}", rank, signal, signals))
    return rows


def test_a_model_that_wins_on_mrr_but_loses_at_the_top_is_not_activated():
    report = learned_rank.fit(lifted_and_pushed_rows(4, 8, 8), POLICY)
    # Better on MRR by far more than the minimum gain: the old rule would have served it.
    assert report.model_figure > report.hand_figure + POLICY.min_gain
    # But fewer questions get their accepted result in the top five.
    assert report.model_hit < report.hand_hit
    assert report.outcome is FitOutcome.WORSE_AT_TOP and not report.activate
    assert report.ranker is not None


def test_the_out_of_fold_figures_count_each_question_once():
    # One question asked in three packs (its up 1st each time), another in one pack (its
    # up 6th): per pack the hit@5 would be 3/4, per question it is 1/2.
    rows = []
    for pack, (query, up_at) in enumerate([("a", 1), ("a", 1), ("a", 1), ("b", 6)]):
        for rank in range(1, 7):
            signal = "up" if rank == up_at else "down"
            rows.append(FeedbackRow(f"p{pack}", query, rank, signal, {"hand_rank": float(rank)}))
    packs = {f"p{n}": [i for i, r in enumerate(rows) if r.pack_id == f"p{n}"] for n in range(4)}
    hand = learned_rank.evaluate(rows, packs, [-r.rank for r in rows])
    assert hand.hit == pytest.approx(0.5) and learned_rank.HIT_AT == 5
    assert hand.mrr == pytest.approx((1.0 + 1 / 6) / 2)
    # The order scored is the one judged: the reverse puts b's up first, a's last.
    reverse = learned_rank.evaluate(rows, packs, [r.rank for r in rows])
    assert (reverse.hit, reverse.mrr) == (pytest.approx(0.5), pytest.approx((1 / 6 + 1.0) / 2))


def test_rows_without_a_signal_vector_are_not_training_data():
    rows = pack_rows(20, up_at=4)
    blank = [FeedbackRow(r.pack_id, r.query_digest, r.rank, r.signal, {}) for r in rows]
    report = learned_rank.fit(blank, POLICY)
    assert report.outcome is FitOutcome.TOO_LITTLE_FEEDBACK and report.training_rows == 0


def test_parameters_round_trip_and_foreign_features_are_refused():
    ranker = learned_rank.fit(pack_rows(20, up_at=4), POLICY).ranker
    assert ranker is not None
    again = LinearRanker.from_parameters(ranker.model_id, ranker.parameters())
    signals = pack_rows(1, up_at=4)[0].signals
    assert again.score(signals) == pytest.approx(ranker.score(signals))
    assert 0.0 < again.score(signals) < 1.0
    foreign = {**ranker.parameters(), "features": [*FEATURES, "text_length"]}
    with pytest.raises(ValueError):
        LinearRanker.from_parameters(ranker.model_id, foreign)


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
    assert [r.rank for r in outcome.results] == [1, 2, 3]
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
            model_figure=report.model_figure,
            hand_figure=report.hand_figure,
            trained_at=datetime.now(UTC),
            newest_feedback_at=newest_feedback_at,
            ranker=report.ranker,
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


def ranking_over(store, feedback, models, **options) -> Ranking:
    defaults = dict(
        policy=POLICY,
        max_training_rows=1000,
        poll_seconds=0.01,
        auto_fit_new_feedback=60,
        auto_fit_check_seconds=0.01,
    )
    return Ranking(
        store,
        feedback,
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
    older = (*FEATURES[:-1], "text_length")
    n = len(older)
    stale = LinearRanker(
        "00000000-0000-4000-8000-00000000000a", older, (0.0,) * n, (1.0,) * n, (1.0,) * n, 0.0
    )
    pool = await open_service_database(settings, server.SCHEMA, server.PACKAGE)
    try:
        stored = await RankStore(pool).record_fit(
            None, FitReport(FitOutcome.ACTIVATED, 50, 10, 10, 0.9, 0.5, stale), None
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
