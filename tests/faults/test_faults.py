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
    hangs,
    unstable_failures,
)
from fault_run import FAULTS, check_run, make_stack, make_workload, run_fault
from fault_stack import FaultStack
from fault_workload import CONTEXT, FEEDBACK, INGEST, OK, PROPOSE, WriteWorkload

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
    assert {r.op for r in records} >= {PROPOSE, CONTEXT, FEEDBACK, INGEST}
    assert [(r.op, r.code, r.reason) for r in records if r.outcome != OK] == []
    conn = await fault_stack.connect_database()
    try:
        assert await acknowledged_writes_missing(conn, records) == []
    finally:
        await conn.close()


@pytest.mark.parametrize("target", FAULTS)
async def test_a_fault_under_write_load_loses_nothing(fault_stack, workload, target) -> None:
    before = fault_stack.pid(target)
    run = await run_fault(fault_stack, workload, target)
    await check_run(fault_stack, workload, run)
    assert run.violations == [], run.figures()
    # The fault hit the load: calls ran while it was down, and some of them failed.
    assert [r for r in run.during_outage() if r.outcome != OK], run.figures()
    assert fault_stack.pid(target) != before


async def test_the_checkers_see_what_they_check(fault_stack, workload) -> None:
    """Each checker reports a violation planted for it, so a pass above means something."""
    acknowledged = next(r for r in workload.records if r.op == PROPOSE and r.outcome == OK)
    lost = replace(acknowledged, call_id="lost", detail={"subject": "fault-never-written"})
    hung = replace(acknowledged, call_id="hung", ended=acknowledged.started + 60)
    bare = replace(acknowledged, call_id="bare", outcome="failed", code="internal_error")
    assert hangs([hung]) and unstable_failures([bare])
    conn = await fault_stack.connect_database()
    backends = Backends.open(fault_stack.client_settings(), caller="cli")
    try:
        assert await acknowledged_writes_missing(conn, [lost])
        assert (await compare_index(conn, backends)).violations() == []
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
    finally:
        await backends.close()
        await conn.close()
