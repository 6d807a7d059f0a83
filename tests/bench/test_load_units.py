"""scripts/load's parts without a stack: the open-loop schedule and driver, the error
codes, the MCP outcome classification, the knee search and the memory report's rule."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench.load import openloop  # noqa: E402
from bench.load.gateway import outcome  # noqa: E402
from bench.load.knee import find_knee  # noqa: E402
from bench.load.memory import MemorySampler  # noqa: E402
from bench.load.openloop import OK, Operation  # noqa: E402
from vera.errors import InvalidInput, Unavailable  # noqa: E402


def test_the_schedule_is_bounded_by_time_and_by_count():
    rng = random.Random(1)
    uniform = openloop.schedule(10, 2.0, 1000, rng, "uniform")
    assert len(uniform) == 19
    assert all(abs(t - n / 10) < 1e-9 for n, t in enumerate(uniform, start=1))
    assert len(openloop.schedule(10, 2.0, 5, rng, "uniform")) == 5
    poisson = openloop.schedule(50, 20.0, 10_000, random.Random(2), "poisson")
    assert 850 < len(poisson) < 1150  # about rate x duration
    assert poisson == sorted(poisson) and poisson[-1] < 20.0


def sleeper(seconds: float, code: str = OK, in_flight: list[int] | None = None) -> Operation:
    """``in_flight``, when given, is [now, most]: how many calls run at once."""

    def make(rng: random.Random):
        async def call() -> str:
            if in_flight is not None:
                in_flight[0] += 1
                in_flight[1] = max(in_flight)
            try:
                await asyncio.sleep(seconds)
            finally:
                if in_flight is not None:
                    in_flight[0] -= 1
            return code

        return call

    return Operation("slow", 1, make)


async def test_calls_start_on_schedule_while_earlier_ones_are_still_running():
    # Each call takes 0.5 s; at 20/s a closed loop of one caller would manage one call.
    in_flight = [0, 0]
    result = await openloop.run(
        [sleeper(0.5, in_flight=in_flight)],
        rate=20,
        duration_s=1.0,
        max_calls=100,
        arrivals="uniform",
    )
    summary = result.summary()
    assert summary["calls"] == 19 and summary["ok"] == 19
    assert summary["latency_ms"]["p50"] >= 500
    # Overlapped, not one after another: counted, not timed (the schedule puts about ten
    # calls in flight at once).
    assert in_flight[1] > 1


async def test_every_failure_is_an_outcome_with_a_stable_code():
    def raising(exc: BaseException) -> Operation:
        def make(rng: random.Random):
            async def call() -> str:
                raise exc

            return call

        return Operation(type(exc).__name__, 1, make)

    ops = [
        raising(InvalidInput("project")),
        raising(Unavailable()),
        raising(TimeoutError()),
        raising(ConnectionResetError()),
        sleeper(0.0, "quota_exceeded"),
    ]
    result = await openloop.run(ops, rate=200, duration_s=0.5, max_calls=60)
    summary = result.summary()
    assert summary["ok"] == 0 and summary["error_rate"] == 1.0
    assert set(summary["errors"]) == {
        "INVALID_INPUT",
        "UNAVAILABLE",
        "client_timeout",
        "client_ConnectionResetError",
        "quota_exceeded",
    }
    assert sum(summary["errors"].values()) == summary["calls"]


def test_mcp_outcomes_are_the_error_contracts_codes():
    def response(status: int, body: object | None = None, text: str = "") -> httpx.Response:
        if body is None:
            return httpx.Response(status, text=text)
        return httpx.Response(status, json=body)

    ok = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"results": []}}}
    assert outcome(response(200, ok)) == (OK, {"results": []})
    refused = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32003, "message": "x", "data": {"code": "quota_exceeded"}},
    }
    assert outcome(response(200, refused))[0] == "quota_exceeded"
    assert outcome(response(429, refused))[0] == "quota_exceeded"
    assert outcome(response(200, {"error": {"code": -32700}}))[0] == "jsonrpc_-32700"
    assert outcome(response(413, text="too large"))[0] == "http_413"
    assert outcome(response(200, {"result": {"isError": True}}))[0] == "tool_error"


async def test_the_knee_is_where_queueing_doubles_the_unloaded_p95():
    # One server that serves one call at a time in 20 ms: one sequential caller gets 50/s,
    # and past that rate the queue grows without bound.
    server = asyncio.Semaphore(1)

    def make(rng: random.Random):
        async def call() -> str:
            async with server:
                await asyncio.sleep(0.02)
            return OK

        return call

    knee = await find_knee(
        [Operation("serial", 1, make)],
        single_calls=10,
        step_s=1.0,
        factors=(0.25, 0.5, 2.0, 4.0),
        arrivals="uniform",
    )
    steps = knee["steps"]
    assert steps[0]["held"] and not steps[-1]["held"]
    assert all(step["held"] for step in steps[:-1])
    assert len(steps) >= 2 and abs(knee["knee_rate_per_s"] - steps[-2]["rate_per_s"]) < 0.01
    assert knee["knee_ratio_to_single_call"] is not None
    assert knee["knee_ratio_to_single_call"] < 1.0  # never beyond one server's capacity
    assert steps[-1]["p95_over_unloaded"] > 2.0


def test_memory_growth_flattens_only_when_the_last_minute_stops_growing():
    sampler = MemorySampler({}, interval_s=10)
    times = [t * 10.0 for t in range(31)]  # five minutes
    sampler.samples["leaking"] = [(t, 100 + t / 6) for t in times]  # 10 MiB per minute
    sampler.samples["warming"] = [(t, 100 + min(t, 120) / 6) for t in times]  # flat after 2 min
    sampler.samples["short"] = [(t, 100.0) for t in times[:6]]  # under two minutes
    report = sampler.report()
    assert report["leaking"]["growth_mib_per_min"] == [10.0] * 5
    assert report["leaking"]["flattened"] is False
    assert report["warming"]["growth_mib_per_min"] == [10.0, 10.0, 0.0, 0.0, 0.0]
    assert report["warming"]["flattened"] is True
    assert "flattened" not in report["short"] and report["short"]["samples"] == 6
