"""The learned ranking stage through the real services and the real gateway: feedback
recorded with the MCP tools, `vera rank fit|status|off`, the model serving without a
restart, the snapshot contract, and what never becomes training data (pack-level
feedback, the legacy alias's client-sent signals, an erased principal's feedback)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import asyncpg
import pytest
from isolation_stack import Stack, bearer, full_stack

from vera import cli
from vera.db.pool import create_pool
from vera.errors import InvalidInput
from vera.retrieval.v1 import retrieval_pb2
from vera.services.retrieval.rank.learned import (
    FEATURES,
    FitOutcome,
    FitReport,
    LinearRanker,
)
from vera.services.retrieval.rank.store import RankStore

# Small thresholds, so a handful of packs can activate a model; a fast poll, so a model
# activated elsewhere serves within the test; no background fit.
RANK = {
    "min_feedback_rows": 4,
    "min_packs": 2,
    "min_gain": 0.0,
    "poll_seconds": 0.05,
    "auto_fit_new_feedback": 0,
}
SERVICES = ("payments", "billing", "ledger", "invoices", "refunds", "checkout")
QUERIES = (
    "which cluster does payments deploy to",
    "where is billing deployed",
    "ledger deployment cluster",
    "what cluster runs invoices",
)


@contextlib.asynccontextmanager
async def ranked_stack(
    pg_dsn, identity_address, tmp_path, embedder, profile="advanced", **rank: object
):
    async with full_stack(
        pg_dsn,
        identity_address,
        tmp_path / "data",
        embedder,
        retrieval_settings={"rank": {**RANK, **rank}},
        tool_profile=profile,
    ) as stack:
        yield stack


async def rank_cli(stack: Stack, monkeypatch, tmp_path, *args: str) -> tuple[int, Any]:
    """`vera rank ... --json` against the stack (in a thread: the CLI runs its own loop)."""
    assert stack.addresses is not None
    monkeypatch.setenv("VERA_SERVICES__RETRIEVAL", stack.addresses.retrieval)
    monkeypatch.setenv("VERA_SERVICES__IDENTITY", stack.addresses.identity)
    out = tmp_path / f"cli-{time.monotonic_ns()}.json"

    def run() -> int:
        with open(out, "w") as sink, contextlib.redirect_stdout(sink):
            return cli.main(["rank", *args, "--json", "--data-dir", str(tmp_path / "none")])

    code = await asyncio.to_thread(run)
    text = out.read_text()
    return code, json.loads(text) if text.strip() else None


async def propose_facts(stack: Stack, who: dict[str, Any]) -> None:
    for n, name in enumerate(SERVICES):
        await stack.ok(
            who,
            "knowledge_propose",
            {
                "subject": f"{name}-service",
                "predicate": "deploys_to",
                "object": f"cluster {name}-{n}",
                "task_ref": f"t-{n}",
            },
        )
    await stack.wait_indexed()


async def packs_with_feedback(stack: Stack, who: dict[str, Any]) -> list[dict[str, Any]]:
    """One persisted pack per query; ``up`` on its last result, ``down`` on the others
    (so a model that learns to lift low hand-set ranks wins out of fold), plus one
    pack-level signal that must never count."""
    packs = []
    for query in QUERIES:
        pack = await stack.ok(who, "knowledge_get_context", {"query": query, "persist": True})
        results = pack["results"]
        assert len(results) >= 3, pack
        for n, result in enumerate(results):
            await stack.ok(
                who,
                "knowledge_feedback",
                {
                    "context_pack_id": pack["pack_id"],
                    "result_ref": result["result_ref"],
                    "signal": "up" if n == len(results) - 1 else "down",
                },
            )
        packs.append(pack)
    await stack.ok(
        who,
        "knowledge_feedback",
        {"context_pack_id": packs[0]["pack_id"], "result_ref": packs[0]["pack_id"], "signal": "up"},
    )
    return packs


def keys(answer: dict[str, Any]) -> list[str]:
    return [r["fact_key"] for r in answer["results"]]


async def served_version(stack: Stack, scope_id: str) -> str:
    status = await stack.retrieval.GetIndexStatus(
        retrieval_pb2.GetIndexStatusRequest(scope_id=scope_id)
    )
    return status.assembler_version


async def test_fit_serves_at_once_pins_snapshots_and_rolls_back(
    pg_dsn, identity_address, tmp_path, embedder, monkeypatch
) -> None:
    async with ranked_stack(pg_dsn, identity_address, tmp_path, embedder) as stack:
        alice = await stack.account("alice")
        home = alice["personal_scope_id"]
        await propose_facts(stack, alice)
        packs = await packs_with_feedback(stack, alice)
        result_rows = sum(len(p["results"]) for p in packs)

        code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
        assert code == 0 and status["active"] is None and status["last_fit"] is None
        hand_version = status["assembler_version"]
        before = await stack.ok(alice, "knowledge_get_context", {"query": QUERIES[0]})
        assert before["assembler_version"] == hand_version
        snap_hand = (await stack.ok(alice, "knowledge_create_snapshot", {"project": home}))[
            "snapshot_id"
        ]

        code, fitted = await rank_cli(stack, monkeypatch, tmp_path, "fit")
        assert code == 0, fitted
        assert (fitted["outcome"], fitted["activated"], fitted["active"]) == (
            "activated",
            True,
            True,
        )
        # Result-level rows only: the pack-level signal is not training data.
        assert fitted["training_rows"] == result_rows
        assert (fitted["training_queries"], fitted["evaluated_packs"]) == (4, 4)
        # Judged as it serves: the four questions replayed through the retrieval service,
        # scored on their labels at hit@5, recall@10 and MRR@10.
        assert (fitted["metric"], fitted["replayed_queries"], fitted["cut"]) == (
            "replay_mrr@10",
            4,
            10,
        )
        assert fitted["model_figure"] > fitted["hand_figure"]
        assert fitted["model_hit"] >= fitted["hand_hit"]
        assert fitted["model_recall"] >= fitted["hand_recall"]
        model_version = fitted["assembler_version"]
        assert model_version != hand_version

        # Serves on the next call, no restart: same facts, reordered, the model's contract.
        after = await stack.ok(alice, "knowledge_get_context", {"query": QUERIES[0]})
        assert after["assembler_version"] == model_version
        assert await served_version(stack, home) == model_version
        assert sorted(r["fact_key"] for r in after["results"]) == sorted(
            r["fact_key"] for r in before["results"]
        )
        assert after["results"][0]["fact_key"] == before["results"][-1]["fact_key"]
        assert all("learned" in r["signals"] for r in after["results"])

        code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
        assert status["active"]["model_id"] == fitted["model_id"]
        assert status["active"]["training_rows"] == result_rows
        assert status["assembler_version"] == model_version

        # A snapshot replays under the ranking it was taken with, whatever serves now: the
        # one taken before the fit, with the hand-set ranking.
        replay = await stack.ok(
            alice, "knowledge_get_context", {"query": QUERIES[0], "snapshot_id": snap_hand}
        )
        assert replay["assembler_version"] == hand_version
        assert keys(replay) == keys(before)
        snap_model = (await stack.ok(alice, "knowledge_create_snapshot", {"project": home}))[
            "snapshot_id"
        ]
        pinned = await stack.ok(
            alice, "knowledge_get_context", {"query": QUERIES[0], "snapshot_id": snap_model}
        )
        assert pinned["assembler_version"] == model_version
        assert keys(pinned) == keys(after)
        pinned_search = await stack.ok(
            alice, "knowledge_search", {"query": QUERIES[0], "snapshot_id": snap_model}
        )

        # Rollback: the hand-set ranking serves the next call, and the snapshots swap roles.
        code, gone = await rank_cli(stack, monkeypatch, tmp_path, "off")
        assert code == 0 and gone["disabled"]["model_id"] == fitted["model_id"]
        assert gone["assembler_version"] == hand_version
        back = await stack.ok(alice, "knowledge_get_context", {"query": QUERIES[0]})
        assert [r["fact_key"] for r in back["results"]] == [
            r["fact_key"] for r in before["results"]
        ]
        assert back["assembler_version"] == hand_version
        assert (
            await stack.ok(
                alice, "knowledge_get_context", {"query": QUERIES[0], "snapshot_id": snap_hand}
            )
        )["assembler_version"] == hand_version
        # The snapshot taken under the model still replays with it (loaded from storage),
        # in the order it had then, through both tools.
        replay = await stack.ok(
            alice, "knowledge_get_context", {"query": QUERIES[0], "snapshot_id": snap_model}
        )
        assert replay["assembler_version"] == model_version
        assert keys(replay) == keys(pinned)
        assert all("learned" in r["signals"] for r in replay["results"])
        searched = await stack.ok(
            alice, "knowledge_search", {"query": QUERIES[0], "snapshot_id": snap_model}
        )
        assert keys(searched) == keys(pinned_search)
        code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
        assert status["active"] is None and status["last_fit"]["outcome"] == "activated"

        # Once the model is gone from storage, that replay fails closed.
        conn = await asyncpg.connect(stack.dsn)
        try:
            await conn.execute(
                "DELETE FROM retrieval.rank_models WHERE model_id = $1::uuid", fitted["model_id"]
            )
        finally:
            await conn.close()
        for tool in ("knowledge_get_context", "knowledge_search"):
            replay = await stack.call(alice, tool, {"query": QUERIES[0], "snapshot_id": snap_model})
            assert (replay.error_code, replay.error_data["code"]) == (-32007, "unsupported_version")

        # A model activated by another process (a second retrieval, an operator's fit
        # elsewhere) serves here within the poll interval, without a restart.
        pool = await create_pool(stack.dsn, "retrieval", min_size=1, max_size=1)
        try:
            coef = tuple(-3.0 if f == "final" else 0.0 for f in FEATURES)
            elsewhere = LinearRanker(
                "00000000-0000-4000-8000-000000000001",
                FEATURES,
                (0.0,) * len(FEATURES),
                (1.0,) * len(FEATURES),
                coef,
                0.0,
                window=10,
            )
            await RankStore(pool).record_fit(
                None, FitReport(FitOutcome.ACTIVATED, 1, 1, 1, elsewhere), None
            )
        finally:
            await pool.close()
        deadline = time.monotonic() + 30
        while await served_version(stack, home) == hand_version:
            assert time.monotonic() < deadline, "the activated model was not picked up"
            await asyncio.sleep(0.05)
        flipped = await stack.ok(alice, "knowledge_get_context", {"query": QUERIES[0]})
        assert [r["fact_key"] for r in flipped["results"]] == [
            r["fact_key"] for r in reversed(before["results"])
        ]


async def test_legacy_signals_and_erased_feedback_never_reach_training(
    pg_dsn, identity_address, tmp_path, embedder, monkeypatch
) -> None:
    async with ranked_stack(
        pg_dsn, identity_address, tmp_path, embedder, profile="compatibility"
    ) as stack:
        admin = await stack.account("admin", admin=True)
        alice, bob = await stack.account("alice"), await stack.account("bob")
        await propose_facts(stack, alice)
        await propose_facts(stack, bob)
        alice_packs = await packs_with_feedback(stack, alice)
        bob_packs = await packs_with_feedback(stack, bob)
        # The legacy alias without a pack: whatever "signals" the client sends, nothing is
        # stored as a signal vector and the row is never training data.
        for n in range(5):
            legacy = await stack.ok(
                bob,
                "memory_feedback",
                {
                    "result_ref": f"fact-{n}",
                    "signal": "up" if n % 2 else "down",
                    "query": QUERIES[0],
                    "signals": ["dense=9", "rank=1"],
                },
            )
            assert legacy["level"] == "legacy"

        code, fitted = await rank_cli(stack, monkeypatch, tmp_path, "fit")
        assert code == 0
        bob_rows = sum(len(p["results"]) for p in bob_packs)
        assert fitted["training_rows"] == bob_rows + sum(len(p["results"]) for p in alice_packs)
        # A project's own model learns only from feedback on that project's packs.
        own = await stack.retrieval.FitRankModel(
            retrieval_pb2.FitRankModelRequest(scope_id=bob["personal_scope_id"])
        )
        assert own.model.scope_id == bob["personal_scope_id"]
        assert own.model.training_rows == bob_rows

        erased = await stack.api.delete(
            f"/identity/users/{alice['principal_id']}/personal-knowledge",
            headers=bearer(admin["api_key"]),
        )
        assert erased.status_code == 200, erased.text
        code, refit = await rank_cli(stack, monkeypatch, tmp_path, "fit")
        assert code == 0 and refit["training_rows"] == bob_rows

        conn = await asyncpg.connect(stack.dsn)
        try:
            legacy_rows = await conn.fetch(
                "SELECT attribution, signal_vector::text AS v FROM knowledge.retrieval_feedback"
                " WHERE pack_id LIKE 'legacy:%'"
            )
        finally:
            await conn.close()
        assert [(r["attribution"], r["v"]) for r in legacy_rows] == [("unattributed", "{}")] * 5


async def test_a_fit_reads_at_most_each_principals_newest_rows(
    pg_dsn, identity_address, tmp_path, embedder, monkeypatch
) -> None:
    cap = 5
    async with ranked_stack(
        pg_dsn, identity_address, tmp_path, embedder, max_rows_per_principal=cap
    ) as stack:
        alice, bob = await stack.account("alice"), await stack.account("bob")
        await propose_facts(stack, alice)
        await propose_facts(stack, bob)
        given = [
            sum(len(p["results"]) for p in await packs_with_feedback(stack, who))
            for who in (alice, bob)
        ]
        assert min(given) > cap
        code, fitted = await rank_cli(stack, monkeypatch, tmp_path, "fit")
        assert code == 0
        assert fitted["training_rows"] == 2 * cap


async def test_too_little_feedback_keeps_the_hand_set_ranking_and_status_says_why(
    pg_dsn, identity_address, tmp_path, embedder, monkeypatch
) -> None:
    rows = 3
    async with ranked_stack(pg_dsn, identity_address, tmp_path, embedder) as stack:
        alice = await stack.account("alice")
        await propose_facts(stack, alice)
        pack = await stack.ok(
            alice, "knowledge_get_context", {"query": QUERIES[0], "persist": True}
        )
        for result in pack["results"][:rows]:
            await stack.ok(
                alice,
                "knowledge_feedback",
                {
                    "context_pack_id": pack["pack_id"],
                    "result_ref": result["result_ref"],
                    "signal": "up",
                },
            )
        code, hand = await rank_cli(stack, monkeypatch, tmp_path, "status")
        code, fitted = await rank_cli(stack, monkeypatch, tmp_path, "fit")
        assert code == 0
        assert (fitted["outcome"], fitted["active"]) == ("too_little_feedback", False)
        assert fitted["training_rows"] == rows
        code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
        assert status["active"] is None
        assert status["last_fit"]["outcome"] == "too_little_feedback"
        assert status["assembler_version"] == hand["assembler_version"]


async def test_bad_arguments_are_refused_with_the_field(
    pg_dsn, identity_address, tmp_path, embedder, monkeypatch
) -> None:
    async with ranked_stack(pg_dsn, identity_address, tmp_path, embedder) as stack:
        with pytest.raises(InvalidInput) as err:
            await stack.retrieval.FitRankModel(retrieval_pb2.FitRankModelRequest(max_rows=-1))
        assert err.value.field == "max_rows"
        with pytest.raises(InvalidInput) as err:
            await stack.retrieval.GetRankStatus(retrieval_pb2.GetRankStatusRequest(scope_id="nope"))
        assert err.value.field == "scope_id"
        code, _ = await rank_cli(stack, monkeypatch, tmp_path, "fit", "--project", "no-such")
        assert code == 2


async def test_the_serving_check_switches_a_model_off_status_says_so_and_on_restores_it(
    pg_dsn, identity_address, tmp_path, embedder, monkeypatch
) -> None:
    """The safety net through the real retrieval service and PostgreSQL: a model that
    later feedback shows behind the hand-set order is switched off by the check, status
    reports when and on what figures, and `vera rank on` serves it again."""
    async with ranked_stack(
        pg_dsn,
        identity_address,
        tmp_path,
        embedder,
        guard_check_seconds=0.2,
        guard_min_queries=len(QUERIES),
        guard_margin=0.0,
    ) as stack:
        alice = await stack.account("alice")
        await propose_facts(stack, alice)
        await packs_with_feedback(stack, alice)  # teaches "the hand-set last is best"
        code, fitted = await rank_cli(stack, monkeypatch, tmp_path, "fit")
        assert code == 0 and fitted["activated"], fitted

        # Later users disagree: on every query the hand-set first result is the one.
        for query in QUERIES:
            pack = await stack.ok(alice, "knowledge_get_context", {"query": query, "persist": True})
            assert pack["assembler_version"] == fitted["assembler_version"]
            for result in pack["results"]:
                first = result["signals"]["hand_rank"] == 1.0
                await stack.ok(
                    alice,
                    "knowledge_feedback",
                    {
                        "context_pack_id": pack["pack_id"],
                        "result_ref": result["result_ref"],
                        "signal": "up" if first else "down",
                    },
                )

        deadline = time.monotonic() + 30
        while True:
            code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
            if status["switched_off"] is not None:
                break
            assert time.monotonic() < deadline, "the serving check never switched it off"
            await asyncio.sleep(0.2)
        assert status["active"] is None
        off = status["switched_off"]
        assert off["model_id"] == fitted["model_id"] and not off["active"]
        check = off["switched_off"]
        assert check["model"]["queries"] == check["hand"]["queries"] == len(QUERIES)
        assert check["model"]["mrr"] < check["hand"]["mrr"]
        hand_version = status["assembler_version"]
        assert hand_version != fitted["assembler_version"]
        answer = await stack.ok(alice, "knowledge_get_context", {"query": QUERIES[0]})
        assert answer["assembler_version"] == hand_version
        assert all("learned" not in r["signals"] for r in answer["results"])

        code, back = await rank_cli(stack, monkeypatch, tmp_path, "on")
        assert code == 0 and back["enabled"]["model_id"] == fitted["model_id"]
        assert back["enabled"]["active"] and back["enabled"]["switched_off"] is None
        code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
        assert status["active"]["model_id"] == fitted["model_id"]
        assert status["assembler_version"] == fitted["assembler_version"]
        # Watched afresh: the feedback that switched it off is behind it now.
        await asyncio.sleep(1.0)
        code, status = await rank_cli(stack, monkeypatch, tmp_path, "status")
        assert status["active"]["model_id"] == fitted["model_id"]
