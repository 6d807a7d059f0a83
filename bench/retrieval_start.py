"""Where a retrieval replica's start goes, step by step:

    scripts/bench retrieval-start DATA_DIR [--runs 3] [--kill] [--out PATH]

DATA_DIR is a stopped stack's data dir (``scripts/bench scale --scale-keep DIR`` leaves
one in ``DIR/<facts>/data``). Its embedded PostgreSQL is started, then each run is a fresh
process that does what ``vera serve retrieval`` does (the CLI's parser, the service's
import, ``server.create``, the gRPC server's start) and times each part: the CLI, the
import, and every loading step of ``create`` as (start, end) seconds from its beginning
(they overlap: they run at once), and reads the peak RSS once serving. Each run starts
three times, one after the other, so the kinds of start meet the same load on the box:
without the memory snapshot (a full refill from ``retrieval.documents``, which leaves a
new one), from that snapshot (a restart), and as a new pod (no file of its own, the
writer's copy in PostgreSQL: shared_snapshot.py, published once before the first such
start). Each start reports where its memory came from. ``--kill`` ends
each run with SIGKILL instead of a clean stop, so the next one opens the vector shard as
after a crash (what ``scripts/bench scale``'s ``retrieval_start_s`` measures under
``vera up``, plus the supervisor's restart delay and its probes).
Knowledge is not running: nothing here dials it before the start is timed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import record

KINDS = ("refill", "restart", "new pod")
LOADED_FROM = {"refill": "documents", "restart": "snapshot", "new pod": "shared snapshot"}
SETTLE_SECONDS = 3.0  # a killed run serves this long first, as a replica would


def _child(kill: bool) -> None:
    t_exec = float(os.environ["BENCH_T0"])
    t_main = time.time()
    t = time.perf_counter()
    import vera.cli

    vera.cli.build_parser()
    cli_s = time.perf_counter() - t
    t = time.perf_counter()
    from vera.services.retrieval import server

    import_s = time.perf_counter() - t
    from vera.config import load_settings

    origin = [0.0]

    class Timed(server.StartHook):
        """Times each loading step of the start, and keeps the parts it built."""

        def __init__(self) -> None:
            self.spans: dict[str, tuple[float, float]] = {}
            self.parts: server.Parts | None = None

        async def step(self, name, load):
            start = time.perf_counter()
            try:
                return await load()
            finally:
                self.spans[name] = (start - origin[0], time.perf_counter() - origin[0])

        def built(self, parts: server.Parts) -> None:
            self.parts = parts

    hook = Timed()

    async def start() -> dict:
        settings = load_settings()
        origin[0] = time.perf_counter()
        hosted = await server.create(settings, "127.0.0.1:0", hook=hook)
        await hosted.running.server.start()
        create_s = time.perf_counter() - origin[0]
        report = {
            "interpreter_s": t_main - t_exec,
            "cli_s": cli_s,
            "import_s": import_s,
            "create_s": create_s,
            "to_serving_s": time.time() - t_exec,
            "peak_rss_mib": _peak_rss_mib(),
            "loaded_from": hook.parts.index.loaded_from if hook.parts else "",
            "steps": {k: [round(v, 3) for v in span] for k, span in hook.spans.items()},
        }
        print(json.dumps(report), flush=True)
        if kill:
            await asyncio.sleep(SETTLE_SECONDS)
            os.kill(os.getpid(), signal.SIGKILL)
        await hosted.running.server.stop(0)
        await hosted.aclose()
        return report

    asyncio.run(start())


def _peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


async def _publish(env: dict[str, str], path: Path) -> float:
    """Publishes the local snapshot as the index's writer would (claiming the index);
    returns the seconds the copy took."""
    from vera.db.pool import create_pool
    from vera.services.retrieval.documents.index import DocumentIndex
    from vera.services.retrieval.memory.facts import FactMemory
    from vera.services.retrieval.memory.snapshot_file import MemorySnapshot
    from vera.services.retrieval.memory.snapshot_shared import SharedSnapshot, purge

    pool = await create_pool(env["VERA_DATABASE__DSN"], "retrieval", min_size=1, max_size=2)
    try:
        index = DocumentIndex(
            pool, FactMemory(1), snapshot=MemorySnapshot(path, ""),
            shared=SharedSnapshot(pool, env["VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY"].encode()))
        await index.claim_writer()
        async with pool.acquire() as conn:
            await purge(conn)  # an earlier run's copy: this one is timed writing its own
        start = time.perf_counter()
        if await index.publish_snapshot() is None:
            raise SystemExit("the snapshot could not be published")
        return time.perf_counter() - start
    finally:
        await pool.close()


def main(data_dir: Path, runs: int, kill: bool, out: Path | None, argv: list[str]) -> int:
    from vera.db.embedded import EmbeddedPostgres
    from vera.services.retrieval.server import MEMORY_SNAPSHOT

    pg = EmbeddedPostgres(data_dir)
    pg.start()
    results = []
    try:
        dsn = asyncio.run(pg.ensure_database())
        publish_s = float("nan")
        env = {
            **os.environ,
            "VERA_DATA_DIR": str(data_dir),
            "VERA_DATABASE__DSN": dsn,
            "VERA_RPC__AUTH_KEY": "bench-" + "k" * 32,
            "VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY": "bench-" + "s" * 32,
            "HF_HUB_OFFLINE": "1",
            "VERA_SERVICES__KNOWLEDGE": "127.0.0.1:9",
        }
        for run in range(len(KINDS) * runs):
            kind = KINDS[run % len(KINDS)]
            if kind == "new pod" and run < len(KINDS):
                publish_s = asyncio.run(_publish(env, data_dir / MEMORY_SNAPSHOT))
                size_mib = (data_dir / MEMORY_SNAPSHOT).stat().st_size / 2**20
                print(f"published the {size_mib:.0f} MiB snapshot in {publish_s:.2f} s")
            if kind != "restart":
                (data_dir / MEMORY_SNAPSHOT).unlink(missing_ok=True)
            env["VERA_RETRIEVAL__SHARE_MEMORY_SNAPSHOT"] = str(kind == "new pod").lower()
            env["BENCH_T0"] = repr(time.time())
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.retrieval_start",
                    "--child",
                    *(["--kill"] if kill else []),
                ],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            if not lines:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            results.append({"start": kind, **json.loads(lines[-1])})
            print(json.dumps(results[-1]))
            if results[-1]["loaded_from"] != LOADED_FROM[kind]:
                print(f"a {kind} start loaded from {results[-1]['loaded_from']}",
                      file=sys.stderr)
                return 1
    finally:
        pg.stop()
    keys = ("interpreter_s", "cli_s", "import_s", "create_s", "to_serving_s", "peak_rss_mib")
    medians, steps = {}, {}
    for kind in KINDS:
        mine = [r for r in results if r["start"] == kind]
        medians[kind] = {k: round(statistics.median(r[k] for r in mine), 3) for k in keys}
        steps[kind] = {
            name: round(statistics.median(r["steps"][name][1] - r["steps"][name][0]
                                          for r in mine), 3)
            for name in mine[0]["steps"]
        }
    ratios = {kind: medians["refill"]["to_serving_s"] / medians[kind]["to_serving_s"]
              for kind in KINDS[1:]}
    figures = record.table(
        [f"part, median of {runs}", "full refill", "restart (local snapshot)",
         "new pod (shared snapshot)"],
        [*([k, *(medians[kind][k] for kind in KINDS)] for k in keys),
         *([f"create: {name}", *(steps[kind][name] for kind in KINDS)]
           for name in steps["refill"]),
         ["to serving: full refill / this", 1.0, ratios["restart"], ratios["new pod"]]],
        digits=[None, 3, 3, 3])
    print("\n".join(record.as_markdown(figures)))
    record.write("retrieval-start", argv, [figures])
    if out is not None:
        out.write_text(json.dumps(
            {"runs": results, "median": medians, "steps_median": steps,
             "refill_over": ratios, "publish_s": publish_s}, indent=2))
    return 0


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench retrieval-start")
    parser.add_argument("data_dir", type=Path, nargs="?")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kill", action="store_true", help="end each run with SIGKILL")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.kill)
        return 0
    if args.data_dir is None:
        parser.error("DATA_DIR is required")
    return main(args.data_dir.resolve(), args.runs, args.kill, args.out, argv)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
