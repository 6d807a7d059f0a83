"""One fault under load, and the whole matrix as a script with its figures.

``run_fault`` starts the write workload on a `vera up` stack, lets it run, injects the
fault (SIGKILL of one process, or PostgreSQL stopped with ``-m immediate``), waits until
`vera up`'s supervisor reports the process serving again, keeps the load on a while
longer, then stops it. The checks are in ``fault_checks``; ``check_run`` applies them all.

    .venv/bin/python tests/faults/fault_run.py [--before S] [--after S] [--clients N] [FAULT ...]

runs every fault once on a fresh stack and prints, per fault, the calls per outcome, the
slowest call against its deadline, how long the process was down and how long the index
took to agree again (the figures RELIABILITY.md records); the stack's log is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fault_checks
from fault_stack import POSTGRES, PROCESSES, FaultStack
from fault_workload import CallRecord, WriteWorkload, answered_as_expected

from vera.rpc.backends import Backends

FAULTS = (*PROCESSES, POSTGRES)
# The fault stack's time limits: short, so a hang shows within a burst.
BUDGET_SECONDS = 6.0
STACK_SETTINGS = {
    "VERA_MCP__REQUEST_BUDGET_SECONDS": str(BUDGET_SECONDS),
    "VERA_RPC__DEADLINE_SECONDS": "5",
    "VERA_RPC__RETRIEVAL_DEADLINE_SECONDS": str(BUDGET_SECONDS),
    "VERA_DATABASE__STATEMENT_TIMEOUT_SECONDS": "4",
    "VERA_DATABASE__COMMAND_TIMEOUT_SECONDS": "5",
    # The load is one principal writing fast; quotas still count every call. Each call
    # opens its own MCP session (fault_workload._Session), so discovery traffic (initialize,
    # notifications) is twice the tool calls and would exhaust the per-process bucket.
    "VERA_MCP__DISCOVERY_PER_MINUTE": "1000000",
    "VERA_MCP__DISCOVERY_CEILING_PER_MINUTE": "1000000",
    **{
        f"VERA_MCP__QUOTA_{bucket}": "1000000"
        for bucket in (
            "READ_PER_MINUTE",
            "CONTEXT_PER_MINUTE",
            "PROPOSE_PER_MINUTE",
            "FEEDBACK_PER_MINUTE",
        )
    },
}
INDEX_AGREEMENT_TIMEOUT_SECONDS = 60.0


@dataclass
class FaultRun:
    target: str
    records: list[CallRecord]
    down_at: float
    back_at: float
    healed: list[CallRecord] = field(default_factory=list)
    index_seconds: float = 0.0
    violations: list[str] = field(default_factory=list)
    # Calls without a definite answer (unknown, or an outage): op -> (applied, total).
    open_ended: dict[str, tuple[int, int]] = field(default_factory=dict)

    def during_outage(self) -> list[CallRecord]:
        return [r for r in self.records if r.started < self.back_at and r.ended > self.down_at]

    def figures(self) -> dict:
        outcomes = Counter(
            ":".join(str(part) for part in (r.outcome, r.code, r.reason) if part)
            for r in self.records
        )
        slowest = max(self.records, key=lambda r: r.latency)
        return {
            "fault": self.target,
            "calls": len(self.records),
            "outcomes": dict(sorted(outcomes.items())),
            "max_latency_s": round(slowest.latency, 2),
            "deadline_s": round(slowest.deadline, 2),
            "down_s": round(self.back_at - self.down_at, 2),
            "index_agreement_s": round(self.index_seconds, 2),
            "open_ended_applied": {
                op: f"{done}/{total}" for op, (done, total) in self.open_ended.items()
            },
            "violations": len(self.violations),
        }


def make_stack(data_dir: Path) -> FaultStack:
    return FaultStack(data_dir, settings=dict(STACK_SETTINGS))


def make_workload(stack: FaultStack, run_id: str) -> WriteWorkload:
    return WriteWorkload(
        stack.mcp_url,
        stack.mcp_token(),
        stack.client_settings(),
        run_id=run_id,
        mcp_budget_seconds=BUDGET_SECONDS,
        ingest_deadline_seconds=BUDGET_SECONDS,
    )


async def run_fault(
    stack: FaultStack,
    workload: WriteWorkload,
    target: str,
    *,
    clients: int = 3,
    before: float = 1.0,
    after: float = 1.0,
) -> FaultRun:
    """Load for ``before`` s, the fault, the supervisor's restart, ``after`` s more."""
    stop = asyncio.Event()
    load = asyncio.create_task(workload.run_until(stop, clients, phase=target))
    try:
        await asyncio.sleep(before)
        restarts = stack.restarts(target)
        down_at = time.monotonic()
        if target == POSTGRES:
            await asyncio.to_thread(stack.stop_postgres_immediately)
        else:
            stack.kill(target)
        await stack.wait_restarted(target, restarts)
        back_at = time.monotonic()
        await asyncio.sleep(after)
    finally:
        stop.set()
    await asyncio.sleep(after)
    stop.set()
    return FaultRun(target, await load, down_at, back_at)


async def check_run(stack: FaultStack, workload: WriteWorkload, run: FaultRun) -> None:
    """Fills ``run.healed`` (one call of each write after the fault), ``index_seconds``
    and ``violations``."""
    run.healed = await _healed(workload, run.target)
    conn = await stack.connect_database()
    backends = Backends.open(stack.client_settings(), caller="cli")
    try:
        records = run.records + run.healed
        found = [
            f"after the fault: {r.op} {r.call_id} {r.outcome} {r.code}"
            for r in run.healed
            if not answered_as_expected(r)
        ]
        found += await fault_checks.acknowledged_writes_missing(conn, records)
        found += await fault_checks.definite_failures_applied(conn, records)
        found += fault_checks.refusals_acknowledged(records)
        found += fault_checks.hangs(records)
        found += fault_checks.unstable_failures(records)
        found += await fault_checks.half_applied_writes(conn)
        run.open_ended = await fault_checks.applied_share(conn, records)
        run.index_seconds, comparison = await fault_checks.wait_for_index_agreement(
            conn, backends, INDEX_AGREEMENT_TIMEOUT_SECONDS
        )
        found += comparison.violations()
        run.violations = found
    finally:
        await backends.close()
        await conn.close()


async def _healed(workload: WriteWorkload, target: str) -> list[CallRecord]:
    """One call of each write (the refused proposal included) once the restarted process
    serves again. Services cache channels and pools that reconnect on their own, so the
    first calls may still meet the old connection: a few seconds are allowed before every
    write must be answered as on a healthy stack."""
    give_up = time.monotonic() + 15.0
    while True:
        records = await workload.one_of_each(phase=f"{target}-healed")
        if all(answered_as_expected(r) for r in records) or time.monotonic() > give_up:
            return records
        await asyncio.sleep(0.5)


async def _main(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="vera-faults-"))
    stack = make_stack(base / "data")
    await asyncio.to_thread(stack.start)
    failed = False
    try:
        workload = make_workload(stack, run_id=f"r{int(time.time())}")
        await workload.prepare()
        for target in args.faults:
            run = await run_fault(
                stack,
                workload,
                target,
                clients=args.clients,
                before=args.before,
                after=args.after,
            )
            await check_run(stack, workload, run)
            print(json.dumps(run.figures()), flush=True)
            for violation in run.violations:
                failed = True
                print(f"  VIOLATION {violation}", flush=True)
    finally:
        await asyncio.to_thread(stack.close)
    print(f"stack log: {base / 'stack.log'}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=float, default=3.0)
    parser.add_argument("--after", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("faults", nargs="*", default=list(FAULTS))
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
