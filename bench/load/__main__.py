"""``scripts/load``: open-loop load on the MCP gateway or one gRPC service alone.

    scripts/load [--service gateway|retrieval|knowledge|identity|snapshot[,...]]
                 [--rate R] [--duration S | --soak S] [--max-calls N] [--knee]
                 [--principals N] [--projects-per-principal N] [--facts-per-project N]
                 [--data-dir DIR | --external [--url URL]] [--allow-non-loopback]
                 [--out PATH]

By default it starts its own stack (``vera.stack.launcher.launch``, built-in JWT verification so
every principal has a token, quotas charged through identity but set out of reach),
seeds principals, projects and facts over gRPC, then drives each named target in turn:
the gateway with the MCP mix (bench/load/gateway.py) or a service with its RPC mix
(bench/load/services.py), open-loop at ``--rate`` for ``--duration`` seconds or
``--max-calls`` calls, whichever ends first. ``--soak S`` is a long run whose report
adds each process's RSS growth per minute. ``--knee`` steps the rate instead
(bench/load/knee.py). Every target must be a loopback address unless
``--allow-non-loopback`` says otherwise. Prints a table; writes the JSON report.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench import record
from bench.load import gateway as gateway_mix
from bench.load import knee, openloop, seed, services
from bench.load.memory import MemorySampler, stack_processes
from vera.addresses import is_loopback_address, is_loopback_host
from vera.config import Settings, load_settings
from vera.rpc.backends import Backends

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "bench-results" / "load.json"
TARGETS = ("gateway", *services.SERVICES)
NOISE = (
    "taken on a shared machine: other processes compete for the same cores, so "
    "absolute figures are noisy; compare ratios measured in the same run"
)
# Out of reach for the load, so every call still pays the shared quota's ChargeQuota RPC.
HIGH_QUOTA = "10000000"
AUTH_ISSUER = "https://load.vera.invalid"
AUTH_AUDIENCE = "https://mcp.load.vera.invalid"
EXIT_REFUSED = 3  # a target off this machine without --allow-non-loopback


@dataclass
class Target:
    settings: Settings  # service addresses, the internal key, the token issuer
    mcp_url: str | None
    stack_pids: list[int]
    pgdata: Path | None
    origin: str


def launched_env(data_dir: Path, secret: str) -> dict[str, str]:
    from vera.stack.launcher import launch_env

    return launch_env(
        data_dir,
        HF_HUB_OFFLINE="1",
        VERA_MCP__JWT_SECRET=secret,
        VERA_MCP__AUTH_ISSUER=AUTH_ISSUER,
        VERA_MCP__AUTH_AUDIENCE=AUTH_AUDIENCE,
        **{
            f"VERA_MCP__QUOTA_{bucket}_PER_MINUTE": HIGH_QUOTA
            for bucket in ("READ", "CONTEXT", "PROPOSE", "FEEDBACK")
        },
        VERA_MCP__QUOTA_SNAPSHOT_PER_HOUR=HIGH_QUOTA,
    )


def token_settings(secret: str) -> dict:
    return {"jwt_secret": secret, "auth_issuer": AUTH_ISSUER, "auth_audience": AUTH_AUDIENCE}


@contextlib.contextmanager
def own_stack(workdir: Path) -> Iterator[Target]:
    from vera.stack.launcher import launch
    from vera.stack.run_files import stack_client_settings

    data_dir = workdir / "data"
    secret = secrets.token_urlsafe(32)
    with launch(
        data_dir,
        launched_env(data_dir, secret),
        log_path=workdir / "stack.log",
        cwd=ROOT,
        ready_timeout=300,
    ) as stack:
        assert stack.process is not None
        settings = stack_client_settings(
            Settings(environment="local", mcp=token_settings(secret)), data_dir
        )
        yield Target(
            settings,
            stack.mcp_url,
            [stack.process.pid],
            data_dir / "postgres",
            "own stack (vera up in a temporary data dir)",
        )


def attached(data_dir: Path) -> Target:
    from vera.stack.run_files import read_stack_file, stack_client_settings

    data_dir = data_dir.expanduser().resolve()
    info = read_stack_file(data_dir)
    if info is None:
        raise SystemExit(f"no running vera up uses {data_dir}")
    settings = stack_client_settings(load_settings(data_dir=data_dir), data_dir)
    return Target(
        settings,
        info["mcp_url"],
        [int(info["pid"])],
        data_dir / "postgres",
        f"running stack on {data_dir}",
    )


def external(url: str | None) -> Target:
    return Target(
        load_settings(),
        url,
        [],
        None,
        "external (VERA_SERVICES__*, VERA_RPC__AUTH_KEY, VERA_MCP__* from the env)",
    )


def check_loopback(target: Target, names: list[str]) -> None:
    """Refuses a target off this machine: a load test aimed at the wrong address is an
    attack on someone else's deployment."""
    off = []
    if (
        "gateway" in names
        and target.mcp_url
        and not is_loopback_host(urlsplit(target.mcp_url).hostname or "")
    ):
        off.append(f"gateway {target.mcp_url}")
    for name in services.SERVICES:  # seeding reaches identity, knowledge and retrieval too
        address = getattr(target.settings.services, name)
        if not is_loopback_address(address):
            off.append(f"{name} {address}")
    if off:
        log(
            "scripts/load: refusing non-loopback targets (" + ", ".join(off) + "); "
            "pass --allow-non-loopback if you mean it"
        )
        raise SystemExit(EXIT_REFUSED)


async def drive(target: Target, names: list[str], args: argparse.Namespace) -> dict:
    report: dict = {"origin": target.origin, "targets": {}}
    backends = Backends.open(target.settings, caller="cli")
    sampler = MemorySampler(
        stack_processes(target.stack_pids, target.pgdata), interval_s=args.memory_interval
    )
    try:
        log(
            f"seeding {args.principals} principals x {args.projects_per_principal} projects x "
            f"{args.facts_per_project} facts"
        )
        world = await seed.seed(
            backends,
            target.settings,
            principals=args.principals,
            projects_per_principal=args.projects_per_principal,
            facts_per_project=args.facts_per_project,
        )
        report["world"] = world.describe()
        log(f"seeded in {world.seed_s:.1f} s")
        async with gateway_mix.client() as http, sampler.running():
            for n, name in enumerate(names):
                if name == "gateway":
                    if target.mcp_url is None:
                        raise SystemExit("the gateway target needs --url (or --data-dir)")
                    if not seed.can_mint_tokens(target.settings):
                        raise SystemExit(
                            "the gateway load needs built-in tokens: set "
                            "VERA_MCP__JWT_SECRET, __AUTH_ISSUER and "
                            "__AUTH_AUDIENCE as the gateway has them"
                        )
                    mix = gateway_mix.GatewayMix(http, target.mcp_url, world)
                    await mix.prepare()
                    operations = mix.operations()
                else:
                    operations = await services.service_mix(name, backends, world)
                report["targets"][name] = await one_target(name, operations, args, seed=n)
        report["memory"] = sampler.report()
    finally:
        await backends.close()
    return report


async def one_target(
    name: str, operations: list[openloop.Operation], args: argparse.Namespace, seed: int
) -> dict:
    warmup = await openloop.each_once(operations, seed=args.seed + seed)
    failed = {op: code for op, code in warmup.items() if code != openloop.OK}
    if failed:
        log(f"{name}: operations failing before the load: {failed}")
    if args.knee:
        log(f"{name}: finding the knee ({args.knee_step_seconds:.0f} s per step)")
        return {
            "each_once": warmup,
            "knee": await knee.find_knee(
                operations,
                single_calls=args.knee_single_calls,
                step_s=args.knee_step_seconds,
                seed=args.seed + seed,
                arrivals=args.arrivals,
                log=log,
            ),
        }
    log(f"{name}: {args.rate}/s for {args.duration:.0f} s (at most {args.max_calls} calls)")
    result = await openloop.run(
        operations,
        args.rate,
        args.duration,
        args.max_calls,
        seed=args.seed + seed,
        arrivals=args.arrivals,
        on_progress=lambda t: log(f"  {name}: {t:.0f} s"),
    )
    return {"each_once": warmup, **result.summary()}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def render(report: dict) -> str:
    lines = []
    for name, result in report["targets"].items():
        if "knee" in result:
            k = result["knee"]
            ratio = k["knee_ratio_to_single_call"]
            lines.append(
                f"{name}: unloaded mean {k['single_call_mean_ms']:.1f} ms, p95 "
                f"{k['unloaded_p95_ms']:.1f} ms; knee "
                + (
                    f"{k['knee_rate_per_s']:.2f}/s = {ratio:.2f} x the single-call rate"
                    if ratio is not None
                    else "below the first step"
                )
            )
            continue
        lat = result["latency_ms"]
        lines.append(
            f"{name}: {result['calls']} calls at {result['target_rate_per_s']}/s, "
            f"{result['throughput_ok_per_s']:.2f} ok/s, p50/p95/p99 {lat['p50']:.1f} / "
            f"{lat['p95']:.1f} / {lat['p99']:.1f} ms, errors {result['error_rate']:.2%} "
            f"{result['errors'] or ''}, late starts {result['late_starts']}"
        )
        for op, row in result["by_operation"].items():
            ol = row["latency_ms"]
            lines.append(
                f"    {op:<40} {row['calls']:>6} calls  p50 {ol['p50']:8.1f}  "
                f"p95 {ol['p95']:8.1f}  errors {row['errors']}"
            )
    for process, m in report.get("memory", {}).items():
        growth = m.get("growth_mib_per_min")
        extra = f"  growth/min {growth}  flattened {m['flattened']}" if growth is not None else ""
        lines.append(
            f"  RSS {process:<30} {m['first_mib']:8.1f} -> {m['last_mib']:8.1f} MiB "
            f"(peak {m['peak_mib']:.1f}){extra}"
        )
    return "\n".join(lines)


def record_tables(report: dict) -> list[dict]:
    """The figures ``render`` prints, as the run's record (bench/record.py)."""
    targets = report["targets"].items()
    knees = [[name, k["single_call_mean_ms"], k["unloaded_p95_ms"], k["knee_rate_per_s"],
              k["knee_ratio_to_single_call"]]
             for name, result in targets if (k := result.get("knee"))]
    runs = [[name, r["calls"], r["target_rate_per_s"], r["throughput_ok_per_s"],
             r["latency_ms"]["p50"], r["latency_ms"]["p95"], r["latency_ms"]["p99"],
             r["error_rate"] * 100, r["late_starts"]]
            for name, r in targets if "knee" not in r]
    memory = [[process, m["first_mib"], m["last_mib"], m["peak_mib"]]
              for process, m in report.get("memory", {}).items()]
    tables = []
    if knees:
        tables.append(record.table(
            ["target", "single call mean ms", "unloaded p95 ms", "knee calls/s",
             "knee / single-call rate"], knees, digits=[None, 1, 1, 2, 2]))
    if runs:
        tables.append(record.table(
            ["target", "calls", "target calls/s", "ok calls/s", "p50 ms", "p95 ms", "p99 ms",
             "errors %", "late starts"], runs, digits=[None, 0, 1, 2, 1, 1, 1, 2, 0]))
    if memory:
        tables.append(record.table(["process", "RSS first MiB", "RSS last MiB", "peak MiB"],
                                   memory, digits=[None, 1, 1, 1]))
    return tables


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/load", description=__doc__.split("\n")[0])
    p.add_argument(
        "--service",
        default="gateway",
        help=f"comma-separated targets, run in turn: {', '.join(TARGETS)}",
    )
    p.add_argument("--rate", type=float, default=5.0, help="calls per second (open loop)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    p.add_argument(
        "--soak",
        type=float,
        metavar="S",
        help="a soak of S seconds (e.g. 600): growth per minute in the report",
    )
    p.add_argument("--max-calls", type=int, default=100_000)
    p.add_argument("--arrivals", choices=("poisson", "uniform"), default="poisson")
    p.add_argument("--knee", action="store_true", help="step the rate up to the knee")
    p.add_argument("--knee-step-seconds", type=float, default=15.0)
    p.add_argument("--knee-single-calls", type=int, default=60)
    p.add_argument("--principals", type=int, default=8)
    p.add_argument("--projects-per-principal", type=int, default=2)
    p.add_argument("--facts-per-project", type=int, default=150)
    p.add_argument("--memory-interval", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--seed", type=int, default=1)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, help="attach to the vera up running on DIR")
    where.add_argument(
        "--external",
        action="store_true",
        help="attach to the services VERA_SERVICES__* name (and --url)",
    )
    p.add_argument("--url", help="the gateway's MCP URL, with --external")
    p.add_argument(
        "--allow-non-loopback", action="store_true", help="let the targets be off this machine"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    names = [n.strip() for n in args.service.split(",") if n.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        p.error(f"--service: unknown {unknown}; choose from {', '.join(TARGETS)}")
    args.names = names
    if args.soak is not None:
        args.duration = args.soak
    if args.rate <= 0 or args.duration <= 0 or args.max_calls <= 0:
        p.error("--rate, --duration and --max-calls must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.data_dir is not None:
            target = attached(args.data_dir)
        elif args.external:
            target = external(args.url)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vera-load-")))
            log("starting a stack (vera up)")
            target = stack.enter_context(own_stack(workdir))
        if not args.allow_non_loopback:
            check_loopback(target, args.names)
        report = asyncio.run(drive(target, args.names, args))
    report = {
        "tool": "scripts/load",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": record.machine_info(),
        "noise": NOISE,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **report,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    print(render(report))
    record.write("load", argv if argv is not None else sys.argv[1:], record_tables(report),
                 wall_s=report["wall_s"], study="load-soak" if args.soak is not None else None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
