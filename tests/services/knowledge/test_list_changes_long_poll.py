"""ListChanges as a long poll: a caught-up tailer's read waits for the next commit (the
outbox trigger's NOTIFY) instead of polling, through a real gRPC server on real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import asyncpg
import pytest

from vera.db.notify import LISTENER_NAME
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb

CURATOR = str(uuid.uuid4())
SCOPE = str(uuid.uuid4())


async def ingest(stub, subject: str) -> None:
    await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=SCOPE,
            sources=[pb.SourceInput(source_id="adr-1", source_type="adr", title="ADR 1")],
            facts=[
                pb.FactInput(
                    subject=subject,
                    predicate="uses_database",
                    object="postgres",
                    source_id="adr-1",
                    evidence=f"{subject} uses postgres",
                    locator="L1",
                )
            ],
        )
    )


MAX_WAIT = 10.0  # the longest wait ListChanges accepts


def waiting(after: int, seconds: float) -> pb.ListChangesRequest:
    request = pb.ListChangesRequest(after_position=after, page_size=100)
    request.max_wait.FromTimedelta(timedelta(seconds=seconds))
    return request


async def head(stub) -> int:
    return (await stub.ListChanges(pb.ListChangesRequest(page_size=1))).head_position


async def test_a_long_poll_answers_as_soon_as_a_change_commits(stub) -> None:
    await ingest(stub, "svc-a")
    position = await head(stub)
    poll = asyncio.ensure_future(stub.ListChanges(waiting(position, MAX_WAIT), timeout=30))
    await asyncio.sleep(0.3)
    assert not poll.done()  # nothing new yet: it waits
    await ingest(stub, "svc-b")
    page = await poll
    # Woken by the commit: a wait that ran out answers an empty page (it re-reads only
    # when notified), so the change itself shows what ended the wait.
    assert [c.fact.subject for c in page.changes if c.fact.subject] == ["svc-b"]


async def test_with_nothing_new_it_answers_empty_after_its_wait(stub) -> None:
    await ingest(stub, "svc-a")
    position = await head(stub)
    started = time.monotonic()
    page = await stub.ListChanges(waiting(position, 0.5))
    assert list(page.changes) == [] and page.head_position == position
    assert time.monotonic() - started >= 0.45


async def test_the_wait_ends_inside_the_calls_deadline(stub) -> None:
    position = await head(stub)
    page = await stub.ListChanges(waiting(position, 10), timeout=1.5)
    assert list(page.changes) == []


async def test_changes_already_there_are_answered_without_waiting(stub) -> None:
    await ingest(stub, "svc-a")
    started = time.monotonic()
    page = await stub.ListChanges(waiting(0, MAX_WAIT), timeout=30)
    # Not a speed target: a call that waited would take its whole wait.
    assert page.changes and time.monotonic() - started < MAX_WAIT


@pytest.mark.parametrize("seconds", [-1, 10.5, 3600])
async def test_a_wait_out_of_range_is_invalid_input(stub, seconds: float) -> None:
    with pytest.raises(InvalidInput) as err:
        await stub.ListChanges(waiting(0, seconds))
    assert err.value.field == "max_wait"


async def test_the_listener_reconnects_after_its_connection_is_killed(stub, pg_dsn: str) -> None:
    admin = await asyncpg.connect(pg_dsn)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = $1 AND datname = current_database()",
            LISTENER_NAME,
        )
        assert killed == 1
        give_up = time.monotonic() + 60
        while True:  # it comes back on its own
            back = await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = $1 AND datname = current_database()",
                LISTENER_NAME,
            )
            if back or time.monotonic() > give_up:
                break
            await asyncio.sleep(0.1)
        assert back == 1
    finally:
        await admin.close()
    position = await head(stub)
    poll = asyncio.ensure_future(stub.ListChanges(waiting(position, MAX_WAIT), timeout=30))
    await asyncio.sleep(0.3)
    await ingest(stub, "svc-c")
    page = await poll
    # Notified through the new connection: a wait that ran out answers an empty page.
    assert [c.fact.subject for c in page.changes if c.fact.subject] == ["svc-c"]
