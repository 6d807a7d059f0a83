"""Open-loop calls: each call starts at its scheduled time whether or not earlier ones
finished, so a slow server builds a queue instead of slowing the load down (a closed loop
would hide exactly the latency a real crowd of agents sees). Latency counts from the
scheduled start, so a call the generator itself started late is charged its wait too,
and late starts are counted apart so the report says when the generator was the
bottleneck.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bench.metrics import percentile

OK = "ok"
# A start this much after its schedule is late: the generator, not the server, fell behind.
LATE_START_MS = 10.0
# Calls in flight beyond this are not started (counted as shed): the generator's own bound.
MAX_IN_FLIGHT = 2000

Call = Callable[[], Awaitable[str]]  # returns OK or an error code; may raise


@dataclass(frozen=True)
class Operation:
    """One kind of call in a mix and its share of the calls."""

    name: str
    weight: float
    call: Callable[[random.Random], Call]  # builds one call's arguments, then the call


@dataclass(frozen=True)
class Outcome:
    op: str
    scheduled_s: float  # since the run's start
    late_ms: float  # actual start minus scheduled start
    latency_ms: float  # completion minus scheduled start
    code: str


@dataclass
class RunResult:
    rate: float
    duration_s: float
    outcomes: list[Outcome]
    shed: int
    wall_s: float

    def summary(self) -> dict:
        return summarize(
            self.outcomes,
            rate=self.rate,
            duration_s=self.duration_s,
            shed=self.shed,
            wall_s=self.wall_s,
        )


def error_code(exc: BaseException) -> str:
    """A stable name for a failure the call itself did not classify."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason
    if isinstance(exc, TimeoutError):
        return "client_timeout"
    return f"client_{type(exc).__name__}"


def schedule(
    rate: float, duration_s: float, max_calls: int, rng: random.Random, arrivals: str = "poisson"
) -> list[float]:
    """Start offsets (s) of every call: a Poisson process (exponential gaps) or evenly
    spaced, at ``rate`` per second, bounded by ``duration_s`` and ``max_calls``."""
    starts: list[float] = []
    t = 0.0
    while len(starts) < max_calls:
        t += rng.expovariate(rate) if arrivals == "poisson" else 1.0 / rate
        if t >= duration_s:
            break
        starts.append(t)
    return starts


async def run(
    operations: Sequence[Operation],
    rate: float,
    duration_s: float,
    max_calls: int,
    *,
    seed: int = 1,
    arrivals: str = "poisson",
    on_progress: Callable[[float], None] | None = None,
) -> RunResult:
    """Runs the mix open-loop; every call's own deadline bounds how long the drain at the
    end can take."""
    rng = random.Random(seed)
    starts = schedule(rate, duration_s, max_calls, rng, arrivals)
    names = [op.name for op in operations]
    weights = [op.weight for op in operations]
    by_name = {op.name: op for op in operations}
    outcomes: list[Outcome] = []
    in_flight: set[asyncio.Task] = set()
    shed = 0
    t0 = time.perf_counter()

    async def one(name: str, call: Call, scheduled: float) -> None:
        begun = time.perf_counter() - t0
        try:
            code = await call()
        except Exception as exc:  # every failure is an outcome, never a crash of the run
            code = error_code(exc)
        done = time.perf_counter() - t0
        outcomes.append(
            Outcome(name, scheduled, (begun - scheduled) * 1000, (done - scheduled) * 1000, code)
        )

    next_progress = 10.0
    for scheduled in starts:
        delay = scheduled - (time.perf_counter() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        if on_progress is not None and scheduled >= next_progress:
            on_progress(scheduled)
            next_progress += 10.0
        if len(in_flight) >= MAX_IN_FLIGHT:
            shed += 1
            continue
        name = rng.choices(names, weights)[0]
        task = asyncio.create_task(one(name, by_name[name].call(rng), scheduled))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    if in_flight:
        await asyncio.gather(*in_flight)
    return RunResult(rate, duration_s, outcomes, shed, time.perf_counter() - t0)


def _latencies(values: Sequence[float]) -> dict[str, float | int]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else float("nan"),
    }


def summarize(
    outcomes: Sequence[Outcome],
    *,
    rate: float,
    duration_s: float,
    shed: int = 0,
    wall_s: float | None = None,
) -> dict:
    """Throughput, latency percentiles (all calls and successful ones), errors by code,
    late starts and the same per operation."""
    wall = wall_s if wall_s is not None else duration_s
    ok = [o for o in outcomes if o.code == OK]
    codes = Counter(o.code for o in outcomes if o.code != OK)
    by_op: dict[str, dict] = {}
    for name in sorted({o.op for o in outcomes}):
        mine = [o for o in outcomes if o.op == name]
        mine_ok = [o.latency_ms for o in mine if o.code == OK]
        by_op[name] = {
            "calls": len(mine),
            "errors": len(mine) - len(mine_ok),
            "latency_ms": _latencies(mine_ok),
        }
    return {
        "target_rate_per_s": rate,
        "duration_s": duration_s,
        "wall_s": round(wall, 3),
        "calls": len(outcomes),
        "ok": len(ok),
        "shed": shed,
        "offered_rate_per_s": len(outcomes) / duration_s if duration_s else 0.0,
        "throughput_ok_per_s": len(ok) / wall if wall else 0.0,
        "latency_ms": _latencies([o.latency_ms for o in ok]),
        "latency_all_ms": _latencies([o.latency_ms for o in outcomes]),
        "errors": dict(sorted(codes.items())),
        "error_rate": (len(outcomes) - len(ok)) / len(outcomes) if outcomes else 0.0,
        "late_starts": sum(1 for o in outcomes if o.late_ms > LATE_START_MS),
        "late_start_threshold_ms": LATE_START_MS,
        "late_start_p99_ms": percentile([o.late_ms for o in outcomes], 99),
        "by_operation": by_op,
    }


async def each_once(operations: Sequence[Operation], *, seed: int = 3) -> dict[str, str]:
    """Every operation once, before the timed calls: a mix whose rare operation is broken
    fails here by name instead of hiding in a short run's sample."""
    rng = random.Random(seed)
    codes = {}
    for op in operations:
        try:
            codes[op.name] = await op.call(rng)()
        except Exception as exc:
            codes[op.name] = error_code(exc)
    return codes


async def unloaded(operations: Sequence[Operation], calls: int, *, seed: int = 2) -> dict:
    """One call at a time (nothing else in flight): the single-call cost of the mix."""
    rng = random.Random(seed)
    names = [op.name for op in operations]
    weights = [op.weight for op in operations]
    by_name = {op.name: op for op in operations}
    outcomes: list[Outcome] = []
    t0 = time.perf_counter()
    for _ in range(calls):
        name = rng.choices(names, weights)[0]
        call = by_name[name].call(rng)
        began = time.perf_counter()
        try:
            code = await call()
        except Exception as exc:
            code = error_code(exc)
        outcomes.append(Outcome(name, began - t0, 0.0, (time.perf_counter() - began) * 1000, code))
    wall = time.perf_counter() - t0
    out = summarize(outcomes, rate=calls / wall, duration_s=wall, wall_s=wall)
    ok = [o.latency_ms for o in outcomes if o.code == OK]
    out["mean_ms"] = sum(ok) / len(ok) if ok else float("nan")
    return out
