"""Learned ranking never makes retrieval worse (issue 30), on the LoCoMo development split
through the real stack and the official MCP client: feedback left as a careful user leaves
it (bench/feedback.judgements: up on every result citing the evidence, down on the top
three that do not) on one conversation, `vera rank fit --all`, then the other
conversation's questions asked again. Whatever the activation rule decides, hit@5, recall@5
and MRR@10 there are not below the hand-set ranking's (recall@10 cannot move: the model
only reorders the hand-set top ``window`` <= 10); a refused model leaves the hand-set
ranking serving, and `vera rank status --json` says why. Few questions, so it stays within
minutes on two cores."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench import locomo
from bench.feedback import NO_BACKGROUND_FIT, evaluate, get_context, record_feedback
from bench.harness import DEFAULT_DATA, ingest_all, running_stack

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

pytestmark = pytest.mark.e2e

QUESTIONS = 60  # per conversation
TIE = 1e-9


def _conversations() -> list[locomo.Conversation]:
    assert DEFAULT_DATA.exists(), f"the LoCoMo development split is missing: {DEFAULT_DATA}"
    first_two = locomo.load(DEFAULT_DATA)[:2]
    return [replace_questions(c, c.questions[:QUESTIONS]) for c in first_two]


def replace_questions(conv: locomo.Conversation, questions: list) -> locomo.Conversation:
    return locomo.Conversation(
        conv.sample_id,
        conv.turns,
        questions,
        conv.skipped_adversarial,
        conv.skipped_no_evidence,
        conv.dropped_evidence,
    )


def vera_rank(data_dir: Path, env: dict[str, str], *args: str) -> dict:
    """`vera rank ... --json` as a curator runs it, against the running stack."""
    done = subprocess.run([sys.executable, "-m", "vera.cli", "rank", *args, "--data-dir",
                           str(data_dir), "--json"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


async def _feedback_then_fit(stack: LaunchedStack, data_dir: Path, env: dict[str, str], train,
                             held_out) -> dict:

    errors: list[dict] = []
    async with stack.mcp_client() as client:
        await get_context(client, held_out, "warm up", errors)
        before = await evaluate(client, [held_out], errors, "hand-set")
        since = dt.datetime.now(dt.UTC).isoformat()
        recorded = await record_feedback(client, [(train, q) for q in train.questions], errors)
        fitted = await asyncio.to_thread(vera_rank, data_dir, env, "fit", "--all",
                                         "--since", since)
        status = await asyncio.to_thread(vera_rank, data_dir, env, "status")
        after = await evaluate(client, [held_out], errors, "after fit")
    return {
        "before": before,
        "after": after,
        "fit": fitted,
        "status": status,
        "recorded": recorded,
        "errors": errors,
    }


def test_feedback_on_one_conversation_never_makes_another_worse() -> None:
    train, held_out = _conversations()
    with tempfile.TemporaryDirectory(prefix="vera-e2e-rank-") as tmp:
        root = Path(tmp)
        failures: list[dict] = []
        with running_stack(root, **NO_BACKGROUND_FIT) as (stack, data_dir, env):
            ingest_all([train, held_out], root, data_dir, env, failures)
            assert failures == []
            run = asyncio.run(_feedback_then_fit(stack, data_dir, env, train, held_out))

    print("fit:", {k: run["fit"][k] for k in ("outcome", "training_rows", "replayed_queries")})
    print("before:", run["before"].summary(), "\nafter:", run["after"].summary())
    assert run["errors"] == []
    assert run["recorded"].signals["up"] > 0 and run["recorded"].signals["down"] > 0
    fitted, status = run["fit"], run["status"]
    before, after = run["before"].summary(), run["after"].summary()
    assert before["questions"] == after["questions"] == len(held_out.questions)
    assert after["hit@5"] >= before["hit@5"] - TIE, (fitted, before, after)
    assert after["recall@5"] >= before["recall@5"] - TIE, (fitted, before, after)
    assert after["mrr@10"] >= before["mrr@10"] - TIE, (fitted, before, after)

    # The fit was judged by replaying its questions, and status shows those figures.
    assert fitted["metric"] == "replay_mrr@10"
    assert fitted["replayed_queries"] > 0
    if fitted["activated"]:
        assert status["active"]["model_id"] == fitted["model_id"]
        assert fitted["model_hit"] >= fitted["hand_hit"]
        assert fitted["model_recall"] >= fitted["hand_recall"]
        assert fitted["model_figure"] > fitted["hand_figure"]
    else:
        # Refused: the hand-set ranking serves, exactly as before, and status says why.
        assert status["active"] is None
        assert status["last_fit"]["outcome"] == fitted["outcome"]
        assert fitted["outcome"] in {
            "too_little_feedback",
            "not_better",
            "worse_at_top",
            "worse_at_recall",
        }
