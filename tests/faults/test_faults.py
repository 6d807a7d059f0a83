"""Nothing acknowledged is lost: each process of a running `vera up` stack is SIGKILLed,
and PostgreSQL stopped with ``-m immediate``, during a mixed write load through the real
front doors (tests/faults/fault_workload.py), while `vera up`'s supervisor brings it back.
Every call's outcome is recorded (ok / failed / unknown); afterwards every acknowledged
write is present, no refused write was applied, no call outlived its deadline, every
failure is the contract's stable answer, every write works again, and the change log
brings retrieval's index back into exact agreement with knowledge's fact versions
(tests/faults/fault_checks.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fault_checks import (
    acknowledged_writes_missing,
    compare_index,
    definite_failures_applied,
    half_applied_writes,
    hangs,
    refusals_acknowledged,
    unstable_failures,
    wait_for_index_agreement,
)
from fault_run import (
    FAULTS,
    INDEX_AGREEMENT_TIMEOUT_SECONDS,
    check_run,
    make_stack,
    make_workload,
    run_fault,
)
from fault_stack import FaultStack
from fault_workload import (
    CONTEXT,
    FAILED,
    FEEDBACK,
    INGEST,
    OK,
    PROPOSE,
    REFUSED,
    REFUSED_CODE,
    WriteWorkload,
    answered_as_expected,
)

from vera.rpc.backends import Backends

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    stack = make_stack(tmp_path_factory.mktemp("faults") / "data")
    try:
        stack.start()
        yield stack
    finally:
        stack.close()


@pytest.fixture(scope="module")
async def workload(fault_stack: FaultStack) -> WriteWorkload:
    load = make_workload(fault_stack, run_id=f"t{int(time.time())}")
    await load.prepare()
    return load


async def test_without_a_fault_every_write_succeeds(fault_stack, workload) -> None:
    records = await workload.one_of_each(phase="baseline")
    records += await workload.run(2.0, 3, phase="baseline")
    assert {r.op for r in records} >= {PROPOSE, CONTEXT, FEEDBACK, INGEST, REFUSED}
    assert [(r.op, r.code, r.reason) for r in records if not answered_as_expected(r)] == []
    conn = await fault_stack.connect_database()
    try:
        assert await acknowledged_writes_missing(conn, records) == []
        assert await definite_failures_applied(conn, records) == []
    finally:
        await conn.close()


@pytest.mark.parametrize("target", FAULTS)
async def test_a_fault_under_write_load_loses_nothing(fault_stack, workload, target) -> None:
    before = fault_stack.pid(target)
    run = await run_fault(fault_stack, workload, target)
    await check_run(fault_stack, workload, run)
    assert run.violations == [], run.figures()
    # The refused-write check had real refusals to look at.
    assert [
        r
        for r in run.records + run.healed
        if r.op == REFUSED and r.outcome == FAILED and r.code == REFUSED_CODE
    ]
    # The fault hit the load: calls ran while it was down, and some of them failed.
    assert [r for r in run.during_outage() if r.outcome != OK], run.figures()
    assert fault_stack.pid(target) != before


async def test_the_checkers_see_what_they_check(fault_stack, workload) -> None:
    """Each of check_run's checkers reports a violation planted for it, so a pass above
    means something."""
    await workload.one_of_each(phase="planted")
    acknowledged = next(r for r in workload.records if r.op == PROPOSE and r.outcome == OK)
    refused = next(r for r in workload.records if r.op == REFUSED and r.outcome == FAILED)
    lost = replace(acknowledged, call_id="lost", detail={"subject": "fault-never-written"})
    hung = replace(acknowledged, call_id="hung", ended=acknowledged.started + 60)
    bare = replace(acknowledged, call_id="bare", outcome="failed", code="internal_error")
    # A refusal whose subject was written after all, and one that was acknowledged.
    subject = acknowledged.detail["subject"]
    written = replace(refused, call_id="written", detail={"subject": subject})
    accepted = replace(refused, call_id="accepted", outcome=OK, code=None)
    assert hangs([hung]) and not hangs([acknowledged])
    assert unstable_failures([bare]) and not unstable_failures([refused])
    assert refusals_acknowledged([accepted]) and not refusals_acknowledged([refused])
    conn = await fault_stack.connect_database()
    backends = Backends.open(fault_stack.client_settings(), caller="cli")
    try:
        assert await acknowledged_writes_missing(conn, [lost])
        assert not await acknowledged_writes_missing(conn, [acknowledged])
        assert await definite_failures_applied(conn, [written])
        assert not await definite_failures_applied(conn, [refused])
        await _plant_half_applied_write(conn, acknowledged.detail["fact_key"])
        await _plant_index_disagreement(conn, backends)
    finally:
        await backends.close()
        await conn.close()


class _RolledBack(Exception):
    pass


async def _plant_half_applied_write(conn, fact_key: str) -> None:
    """A fact version without its change-log row, seen inside a transaction that is then
    rolled back."""
    assert await half_applied_writes(conn) == []
    with pytest.raises(_RolledBack):
        async with conn.transaction():
            version = await conn.fetchval(
                "SELECT version_id FROM knowledge.facts WHERE fact_key = $1 LIMIT 1", fact_key
            )
            await conn.execute(
                "DELETE FROM knowledge.outbox WHERE version_id = $1 AND kind = 'fact_upserted'",
                version,
            )
            assert await half_applied_writes(conn)
            raise _RolledBack
    assert await half_applied_writes(conn) == []


async def _plant_index_disagreement(conn, backends: Backends) -> None:
    _, agreed = await wait_for_index_agreement(conn, backends, INDEX_AGREEMENT_TIMEOUT_SECONDS)
    assert agreed.violations() == []
    version = await conn.fetchval("SELECT version_id FROM retrieval.documents LIMIT 1")
    await conn.execute(
        "UPDATE retrieval.documents SET version_id = 'planted' WHERE version_id = $1", version
    )
    try:
        planted = await compare_index(conn, backends)
        assert planted.missing == [version] and planted.extra == ["planted"]
    finally:
        await conn.execute(
            "UPDATE retrieval.documents SET version_id = $1 WHERE version_id = 'planted'",
            version,
        )
