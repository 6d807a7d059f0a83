"""`scripts/bench bulk-ingest`: one generated file of N facts loaded by `vera ingest`, as a
curator runs it, into a fresh authenticated `vera up` with the default limits.

Issue 41 ("bulk loads finish"): the command paces its polling and honours the API's
``Retry-After`` (``vera.api_client``), so a load far larger than the REST API's per-key
budget (300 requests a minute) finishes. Reports the wall time until every fact is
searchable (the command's own wait) and facts per second; writes
``bench-results/bulk-ingest.json``. ``tests/e2e/test_bulk_ingest.py`` runs the same path
at 30,000 records.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import record, scale_corpus
from bench.record import machine_info
from vera.stack.launcher import LaunchedStack, launch, launch_env

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench-results" / "bulk-ingest.json"
PROJECT = "bulk"
# The command's own stderr line when the API asked it to wait (vera.api_client).
WAIT_NOTICE = "the API asked to wait"


def team_env(data_dir: Path) -> dict[str, str]:
    """An authenticated deployment's environment, every limit at its default."""
    return launch_env(data_dir, VERA_MCP__JWT_SECRET=secrets.token_urlsafe(48),
                      VERA_MCP__AUTH_ISSUER="https://auth.bulk.bench",
                      VERA_MCP__AUTH_AUDIENCE="vera-bulk-bench")


def bulk_file(n_facts: int, directory: Path) -> tuple[Path, int]:
    """One `vera ingest` file of ``n_facts`` generated facts and the sources they cite;
    its path and its record count."""
    corpus = scale_corpus.generate(n_facts, facts_per_file=n_facts, questions=0)
    (path,) = scale_corpus.write_files(corpus, directory)
    return path, sum(len(records) for records in corpus.files)


def administrator_key(stack: LaunchedStack) -> str:
    created = stack.vera("admin", "create-user", "--name", "bulk curator", "--admin",
                         "--data-dir", str(stack.data_dir))
    if created.returncode != 0:
        raise RuntimeError(f"vera admin create-user: {created.stderr.strip()}")
    return next(line.split(":", 1)[1].strip() for line in created.stdout.splitlines()
                if line.startswith("api_key"))


def vera_ingest(stack: LaunchedStack, path: Path, api_key: str,
                timeout: float) -> subprocess.CompletedProcess:
    """`vera ingest --json` as a curator runs it: the key in VERA_API_KEY."""
    return subprocess.run(
        [sys.executable, "-m", "vera.cli", "ingest", str(path), "--project", PROJECT,
         "--data-dir", str(stack.data_dir), "--json"],
        env={**stack.env, "VERA_API_KEY": api_key}, capture_output=True, text=True,
        timeout=timeout)


def run(n_facts: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="vera-bulk-") as tmp:
        path, records = bulk_file(n_facts, Path(tmp))
        data_dir = Path(tmp) / "data"
        with launch(data_dir, team_env(data_dir), ready_timeout=300) as stack:
            key = administrator_key(stack)
            started = time.monotonic()
            done = vera_ingest(stack, path, key, timeout)
            wall = time.monotonic() - started
    summary = json.loads(done.stdout) if done.returncode == 0 else {}
    return {"facts": n_facts, "records": records, "exit_code": done.returncode,
            "wall_s": round(wall, 1),
            "facts_created": summary.get("facts", {}).get("created"),
            "facts_per_s": round(n_facts / wall, 1) if done.returncode == 0 else None,
            "long_waits_asked": done.stderr.count(WAIT_NOTICE),
            "stderr_tail": done.stderr[-2000:] if done.returncode else ""}


def report_of(result: dict) -> dict:
    """The JSON report of a run: when, where, and its result."""
    return {"bench": "bulk-ingest", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine_info(), "result": result}


def cli(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="scripts/bench bulk-ingest",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=7200.0,
                        help="seconds `vera ingest` may take at most")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = run(args.facts, args.timeout)
    report = report_of(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    if result["exit_code"] == 0:
        record.write("bulk-ingest", argv, [record.table(
            ["`vera ingest --json` as a curator", "facts", "records", "facts created",
             "wall s", "facts/s", "waits the API asked for"],
            [["one file into an authenticated stack", result["facts"], result["records"],
              result["facts_created"], result["wall_s"], result["facts_per_s"],
              result["long_waits_asked"]]], digits=[None, 0, 0, 0, 1, 1, 0])],
            wall_s=result["wall_s"])
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
