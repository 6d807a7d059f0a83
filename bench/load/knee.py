"""The knee: the highest offered rate at which p95 stays under twice its unloaded value.

First the single-call cost: calls one at a time, nothing else in flight (its mean is
what one sequential caller pays per call, so ``1 / mean`` is the rate one such caller
reaches; its p95 is the unloaded p95). Then open-loop steps at multiples of that rate,
each ``step_s`` long, stopping at the first step whose p95 passes ``2 x`` the unloaded
p95, errs on more than 1 % of calls or sheds calls. The knee is reported as a rate and
as a ratio to the single-call cost (knee rate x mean single-call seconds: how many
sequential callers' worth of load the target absorbs before queueing shows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from bench.load import openloop
from bench.load.openloop import Operation

FACTORS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0)
P95_FACTOR = 2.0
MAX_ERROR_RATE = 0.01
PAUSE_S = 2.0  # between steps, so one step's queue never spills into the next


async def find_knee(
    operations: Sequence[Operation],
    *,
    single_calls: int = 60,
    step_s: float = 15.0,
    factors: Sequence[float] = FACTORS,
    seed: int = 1,
    arrivals: str = "poisson",
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    base = await openloop.unloaded(operations, single_calls, seed=seed + 1000)
    if base["ok"] == 0:
        raise RuntimeError(f"every unloaded call failed: {base['errors']}")
    single_s = base["mean_ms"] / 1000
    p95_0 = base["latency_ms"]["p95"]
    sequential = 1.0 / single_s
    log(
        f"unloaded: mean {base['mean_ms']:.1f} ms, p95 {p95_0:.1f} ms "
        f"(one sequential caller: {sequential:.1f}/s)"
    )
    steps = []
    knee = None
    for n, factor in enumerate(factors):
        rate = factor * sequential
        result = await openloop.run(
            operations,
            rate,
            step_s,
            max_calls=int(rate * step_s * 2) + 10,
            seed=seed + n,
            arrivals=arrivals,
        )
        s = result.summary()
        p95 = s["latency_ms"]["p95"]
        held = (
            s["ok"] > 0
            and p95 <= P95_FACTOR * p95_0
            and s["error_rate"] <= MAX_ERROR_RATE
            and s["shed"] == 0
        )
        steps.append(
            {
                "factor": factor,
                "rate_per_s": round(rate, 3),
                "held": held,
                "p50_ms": s["latency_ms"]["p50"],
                "p95_ms": p95,
                "p99_ms": s["latency_ms"]["p99"],
                "p95_over_unloaded": p95 / p95_0,
                "throughput_ok_per_s": s["throughput_ok_per_s"],
                "error_rate": s["error_rate"],
                "errors": s["errors"],
                "late_starts": s["late_starts"],
                "calls": s["calls"],
            }
        )
        log(
            f"  {rate:7.2f}/s  p95 {p95:8.1f} ms ({p95 / p95_0:4.2f}x unloaded)  "
            f"errors {s['error_rate']:.1%}  {'held' if held else 'KNEE PASSED'}"
        )
        if not held:
            break
        knee = rate
        await asyncio.sleep(PAUSE_S)
    return {
        "unloaded": base,
        "single_call_mean_ms": base["mean_ms"],
        "unloaded_p95_ms": p95_0,
        "sequential_rate_per_s": sequential,
        "p95_limit_ms": P95_FACTOR * p95_0,
        "step_s": step_s,
        "steps": steps,
        "knee_rate_per_s": knee,
        "knee_ratio_to_single_call": knee * single_s if knee is not None else None,
        "knee_beyond_last_step": knee is not None and len(steps) == len(factors),
    }
