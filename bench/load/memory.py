"""RSS of every process of the stack, sampled over a run: ``vera up``, each service, the
gateway (every replica), the REST API and the embedded PostgreSQL (its postmaster, and
its largest backend: backends share buffers, so their sum would count those many times).

A soak reports each process's growth per minute and whether it flattened: the last
minute grew by at most ``FLAT_MIB_PER_MIN`` or ``FLAT_SHARE_PER_MIN`` of the process's
size, whichever is larger. A leak grows about as much in the last minute as in the
first; warm-up (caches, pools, the allocator's arenas) stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.scale_measure import process_role

FLAT_MIB_PER_MIN = 2.0
FLAT_SHARE_PER_MIN = 0.005
MIB = 1024 * 1024


def _rss(proc: psutil.Process) -> float | None:
    try:
        return proc.memory_info().rss / MIB
    except psutil.Error:
        return None


def stack_processes(stack_pids: Iterable[int], pgdata: Path | None) -> dict[str, list[int]]:
    """Role -> pids of every process under each ``stack_pids`` (``vera up`` or a lone
    gateway) and the postmaster of ``pgdata`` (pg_ctl detaches it)."""
    out: dict[str, list[int]] = {}
    for pid in stack_pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in procs:
            try:
                cmd = proc.cmdline()
            except psutil.Error:
                continue
            role = "vera up" if "up" in cmd and "vera.cli" in " ".join(cmd) else process_role(cmd)
            out.setdefault(role, []).append(proc.pid)
    if pgdata is not None:
        wanted = str(pgdata.resolve())
        for proc in psutil.process_iter(["cmdline"]):
            if wanted in " ".join(proc.info.get("cmdline") or []):
                out["postgres (postmaster)"] = [proc.pid]
                break
    return out


@dataclass
class MemorySampler:
    processes: dict[str, list[int]]
    interval_s: float = 5.0
    samples: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def _sample(self, t: float) -> None:
        for role, pids in self.processes.items():
            for n, pid in enumerate(pids):
                name = role if len(pids) == 1 else f"{role} #{n + 1}"
                try:
                    proc = psutil.Process(pid)
                except psutil.Error:
                    continue
                value = _rss(proc)
                if value is None:
                    continue
                self.samples.setdefault(name, []).append((t, value))
                if role == "postgres (postmaster)":
                    backends = [v for c in proc.children() if (v := _rss(c)) is not None]
                    if backends:
                        self.samples.setdefault("postgres (largest backend)", []).append(
                            (t, max(backends))
                        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MemorySampler]:
        t0 = time.perf_counter()

        async def loop() -> None:
            while True:
                # psutil reads /proc synchronously: off the loop that times the calls.
                await asyncio.to_thread(self._sample, time.perf_counter() - t0)
                await asyncio.sleep(self.interval_s)

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.to_thread(self._sample, time.perf_counter() - t0)

    def report(self, minute_s: float = 60.0) -> dict:
        """Per process: first, last and peak RSS (MiB); for runs of two minutes or more,
        growth per minute and whether it flattened."""
        out: dict[str, dict] = {}
        for name, series in sorted(self.samples.items()):
            values = [v for _, v in series]
            entry: dict = {
                "first_mib": round(values[0], 1),
                "last_mib": round(values[-1], 1),
                "peak_mib": round(max(values), 1),
                "samples": len(values),
            }
            span = series[-1][0] - series[0][0]
            if span >= 2 * minute_s:
                growth = []
                minute = 0
                while (minute + 1) * minute_s <= span + self.interval_s / 2:
                    start = _at(series, series[0][0] + minute * minute_s)
                    end = _at(series, series[0][0] + (minute + 1) * minute_s)
                    growth.append(round(end - start, 2))
                    minute += 1
                entry["growth_mib_per_min"] = growth
                allowed = max(FLAT_MIB_PER_MIN, FLAT_SHARE_PER_MIN * values[-1])
                entry["flattened"] = bool(growth) and growth[-1] <= allowed
            out[name] = entry
        return out


def _at(series: list[tuple[float, float]], t: float) -> float:
    """The sample nearest to ``t``."""
    return min(series, key=lambda s: abs(s[0] - t))[1]
