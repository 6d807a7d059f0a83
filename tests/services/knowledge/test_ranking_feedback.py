"""ListRankingFeedback, what a ranking fit may learn from: only result-level rows whose
signal vector the gateway copied from a stored pack, newest first, per pack scope, with no
text; a vector sent with any other attribution is never stored; erased principals' rows
are gone; one principal contributes at most its newest rows when a cap is asked for."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import RPC_DEADLINE_SECONDS, knowledge_address, knowledge_settings

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as pb_grpc
from vera.rpc.client import open_channel
from vera.services.retrieval.rank.feedback_source import KnowledgeFeedbackSource

ALICE, ALICE_HOME = str(uuid.uuid4()), str(uuid.uuid4())
BOB, BOB_HOME = str(uuid.uuid4()), str(uuid.uuid4())
PROJECT, OTHER_PROJECT = str(uuid.uuid4()), str(uuid.uuid4())
VECTOR = {"dense": 0.7, "lexical": 0.2, "hand_rank": 2.0}


def feedback(
    who: tuple[str, str],
    pack: str,
    result: str,
    signal: str = "up",
    *,
    attribution: int = pb.FEEDBACK_ATTRIBUTION_RESULT,
    scope: str = PROJECT,
    rank: int = 2,
) -> pb.RecordFeedbackRequest:
    return pb.RecordFeedbackRequest(
        principal_id=who[0],
        personal_scope_id=who[1],
        pack_id=pack,
        result_ref=result,
        signal=signal,
        query=f"who deploys {pack}",
        rank=rank,
        signal_vector=VECTOR,
        fact_key=f"fk-{result}",
        attribution=attribution,
        pack_scope_id=scope,
    )


async def listed(stub, **request) -> list[pb.RankingFeedback]:
    rows, token = [], ""
    while True:
        page = await stub.ListRankingFeedback(
            pb.ListRankingFeedbackRequest(page_token=token, **request)
        )
        rows += page.feedback
        token = page.next_page_token
        if not token:
            return rows


async def test_only_server_attributed_result_rows_are_training_data(stub, pg_dsn) -> None:
    alice = (ALICE, ALICE_HOME)
    await stub.RecordFeedback(feedback(alice, "p1", "r1", "up"))
    await stub.RecordFeedback(feedback(alice, "p1", "r2", "down", rank=3))
    await stub.RecordFeedback(feedback(alice, "p2", "r3", "up", scope=OTHER_PROJECT))
    # Pack-level, unattributed (the legacy alias) and unspecified rows carry a vector a
    # client could have made up: none of it is stored, none of it is listed.
    await stub.RecordFeedback(
        feedback(alice, "p1", "p1", rank=0, attribution=pb.FEEDBACK_ATTRIBUTION_PACK)
    )
    await stub.RecordFeedback(
        feedback(
            alice, "legacy:1", "fact-9", rank=0, attribution=pb.FEEDBACK_ATTRIBUTION_UNATTRIBUTED
        )
    )
    await stub.RecordFeedback(
        feedback(alice, "p9", "r9", attribution=pb.FEEDBACK_ATTRIBUTION_UNSPECIFIED)
    )

    rows = await listed(stub)
    assert [(r.pack_id, r.rank, r.signal) for r in rows] == [
        ("p2", 2, "up"),
        ("p1", 3, "down"),
        ("p1", 2, "up"),
    ]  # newest first
    assert all(dict(r.signal_vector) == pytest.approx(VECTOR) for r in rows)
    # The digest groups one question (never the text); the text, the fact and the pack's
    # scope travel beside it, so retrieval can replay the question to judge a model.
    assert rows[1].query_digest == rows[2].query_digest != rows[0].query_digest
    assert all("deploys" not in r.query_digest for r in rows)
    assert [(r.query, r.fact_key, r.pack_scope_id) for r in rows] == [
        ("who deploys p2", "fk-r3", OTHER_PROJECT),
        ("who deploys p1", "fk-r2", PROJECT),
        ("who deploys p1", "fk-r1", PROJECT),
    ]
    assert [r.pack_id for r in await listed(stub, pack_scope_id=PROJECT)] == ["p1", "p1"]
    assert [
        len((await stub.ListRankingFeedback(pb.ListRankingFeedbackRequest(page_size=2))).feedback)
    ] == [2]
    assert len(await listed(stub, page_size=1)) == 3

    conn = await asyncpg.connect(pg_dsn)
    try:
        stored = {
            r["result_ref"]: (r["attribution"], r["signal_vector"])
            for r in await conn.fetch(
                "SELECT result_ref, attribution, signal_vector::text"
                " FROM knowledge.retrieval_feedback"
            )
        }
    finally:
        await conn.close()
    assert stored["r1"][0] == "result" and stored["r1"][1] != "{}"
    assert stored["p1"] == ("pack", "{}")
    assert stored["fact-9"] == ("unattributed", "{}")
    assert stored["r9"] == ("unattributed", "{}")


async def test_recorded_after_bounds_the_rows(stub) -> None:
    await stub.RecordFeedback(feedback((ALICE, ALICE_HOME), "p1", "r1"))
    later = Timestamp()
    later.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    assert await listed(stub, recorded_after=later) == []
    earlier = Timestamp()
    earlier.FromDatetime(datetime.now(UTC) - timedelta(hours=1))
    assert len(await listed(stub, recorded_after=earlier)) == 1


async def test_an_erased_principals_feedback_is_never_listed_again(stub) -> None:
    await stub.RecordFeedback(feedback((ALICE, ALICE_HOME), "p1", "r1"))
    await stub.RecordFeedback(feedback((BOB, BOB_HOME), "p2", "r2", "down"))
    assert len(await listed(stub)) == 2
    erased = await stub.ErasePrincipalData(
        pb.ErasePrincipalDataRequest(
            actor_principal_id=str(uuid.uuid4()), principal_id=ALICE, personal_scope_id=ALICE_HOME
        )
    )
    assert erased.counts["feedback"] == 1
    assert [r.pack_id for r in await listed(stub)] == ["p2"]


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (feedback((ALICE, ALICE_HOME), "p1", "p1", rank=1), "attribution"),
        (feedback((ALICE, ALICE_HOME), "p1", "r1", rank=0), "attribution"),
        (feedback((ALICE, ALICE_HOME), "p1", "r1", scope=""), "pack_scope_id"),
        (feedback((ALICE, ALICE_HOME), "p1", "r1", attribution=7), "attribution"),
        (
            feedback((ALICE, ALICE_HOME), "p1", "r1", attribution=pb.FEEDBACK_ATTRIBUTION_PACK),
            "attribution",
        ),
    ],
)
async def test_an_attribution_that_does_not_fit_the_row_is_refused(stub, request_, field) -> None:
    with pytest.raises(InvalidInput) as err:
        await stub.RecordFeedback(request_)
    assert err.value.field == field


async def test_one_principal_contributes_at_most_its_newest_rows(stub) -> None:
    alice, bob = (ALICE, ALICE_HOME), (BOB, BOB_HOME)
    for n in range(5):
        await stub.RecordFeedback(feedback(alice, f"a{n}", f"r{n}"))
        if n < 2:
            await stub.RecordFeedback(feedback(bob, f"b{n}", f"r{n}", "down"))
    # Alice's newest row is on another project's pack: it does not count against her cap
    # on this project's rows.
    await stub.RecordFeedback(feedback(alice, "elsewhere", "r9", scope=OTHER_PROJECT))

    assert len(await listed(stub)) == 8  # no cap asked for: every row
    capped = await listed(stub, max_rows_per_principal=2)
    assert [r.pack_id for r in capped] == ["elsewhere", "a4", "b1", "b0"]  # newest first
    in_project = await listed(stub, pack_scope_id=PROJECT, max_rows_per_principal=2)
    assert [r.pack_id for r in in_project] == ["a4", "a3", "b1", "b0"]
    # Counted before paging: page by page, the same rows.
    paged = await listed(stub, pack_scope_id=PROJECT, max_rows_per_principal=2, page_size=1)
    assert [r.feedback_id for r in paged] == [r.feedback_id for r in in_project]


async def test_the_retrieval_client_asks_for_the_cap(pg_dsn) -> None:
    async with knowledge_address(knowledge_settings(pg_dsn)) as address:
        channel = open_channel(address, RPC_DEADLINE_SECONDS)
        try:
            stub = pb_grpc.KnowledgeServiceStub(channel)
            for n in range(4):
                await stub.RecordFeedback(feedback((ALICE, ALICE_HOME), f"a{n}", f"r{n}"))
            await stub.RecordFeedback(feedback((BOB, BOB_HOME), "b0", "r0", "down"))
            capped = KnowledgeFeedbackSource(channel, max_rows_per_principal=3)
            rows = await capped.newest(None, None, 100)
            assert [r.pack_id for r in rows] == ["b0", "a3", "a2", "a1"]
            every = await KnowledgeFeedbackSource(channel).newest(None, None, 100)
            assert len(every) == 5
        finally:
            await channel.close()


async def test_a_bad_listing_request_names_the_field(stub) -> None:
    for request, field in (
        (pb.ListRankingFeedbackRequest(max_rows_per_principal=-1), "max_rows_per_principal"),
        (pb.ListRankingFeedbackRequest(pack_scope_id="nope"), "pack_scope_id"),
        (pb.ListRankingFeedbackRequest(page_size=1001), "page_size"),
        (pb.ListRankingFeedbackRequest(page_token="garbage!"), "page_token"),
    ):
        with pytest.raises(InvalidInput) as err:
            await stub.ListRankingFeedback(request)
        assert err.value.field == field


async def test_the_cap_holds_when_a_page_must_look_far_below_the_cursor(stub) -> None:
    """Alice's many rows above the cap sit between the cursor and Bob's one row: the page
    looks further down until it finds him."""
    alice, bob = (ALICE, ALICE_HOME), (BOB, BOB_HOME)
    await stub.RecordFeedback(feedback(bob, "b0", "r0", "down"))
    for n in range(12):
        await stub.RecordFeedback(feedback(alice, f"a{n}", f"r{n}"))
    capped = await listed(stub, max_rows_per_principal=2, page_size=1)
    assert [r.pack_id for r in capped] == ["a11", "a10", "b0"]
    whole = await listed(stub, max_rows_per_principal=2)
    assert [r.feedback_id for r in whole] == [r.feedback_id for r in capped]


async def test_the_training_rows_indexes_are_made_and_the_old_one_dropped(stub, pg_dsn) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        indexes = {
            r["indexname"]: r["indexdef"]
            for r in await conn.fetch(
                "SELECT indexname, indexdef FROM pg_indexes"
                " WHERE schemaname = 'knowledge' AND tablename = 'retrieval_feedback'"
            )
        }
        applied = await conn.fetchval(
            "SELECT count(*) FROM knowledge.schema_migrations"
            " WHERE version = '0010_ranking_feedback_pages'"
        )
    finally:
        await conn.close()
    assert applied == 1
    assert (
        "(seq DESC) INCLUDE (principal_id, pack_scope_id, recorded_at)"
        in (indexes["retrieval_feedback_training_rows"])
    )
    assert (
        "(pack_scope_id, seq DESC) INCLUDE (principal_id, recorded_at)"
        in (indexes["retrieval_feedback_training_by_scope"])
    )
    assert "retrieval_feedback_training" not in indexes  # superseded
