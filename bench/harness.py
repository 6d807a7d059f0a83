"""What the benches share: the LoCoMo file and the MCP call settings, a stack started the
way a user starts one (``running_stack``: `vera up` through vera.stack.launcher) and loaded
with `vera ingest`, the cited turns of a result list, tables, and the machine a run was on.
A bench that builds on another's corpus or in-process pipeline imports that bench's
module (memory_scale on scale's generator, sparse_scale on lexical_ablation's shards); the
benches never import the dispatcher (bench.cli), and scripts/check-import-cycles keeps the
graph free of circles."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from bench import locomo
from bench.metrics import Tally

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
LIMIT = 10
TOKEN_BUDGET = 32000  # the maximum: the budget never truncates the top 10
READY_TIMEOUT_SECONDS = 300
# What a bench that measures the hand-set ranking (or its own fits) runs with.
NO_BACKGROUND_FIT = {"VERA_RETRIEVAL__RANK__AUTO_FIT_NEW_FEEDBACK": "0"}


# --- the stack -------------------------------------------------------------------------


def _vera_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "vera.cli", *args]


@contextmanager
def running_stack(
    root: Path, **env: str
) -> Iterator[tuple[LaunchedStack, Path, dict[str, str]]]:
    """Starts ``vera up`` in ``root/data`` (``vera.stack.launcher.launch``, quotas off, ``env``
    on top); yields (the stack, for its MCP URL, token and clients; data dir, env); stops
    it. A failure, in the stack or in the bench around it, prints the stack log's tail
    first."""
    from vera.stack.launcher import launch, launch_env

    data_dir = root / "data"
    settings = launch_env(
        data_dir, **{"VERA_MCP__QUOTA_ENABLED": "false", "HF_HUB_OFFLINE": "1", **env})
    try:
        with launch(data_dir, settings, log_path=root / "stack.log", cwd=ROOT,
                    ready_timeout=READY_TIMEOUT_SECONDS) as stack:
            yield stack, data_dir, stack.env
    except BaseException:
        print("stack log tail:\n" + _tail(root / "stack.log"), file=sys.stderr)
        raise


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


INGEST_ATTEMPTS = 3  # a load is idempotent: running it again finishes an interrupted one


# `vera ingest`'s per-call deadline (VERA_RPC__DEADLINE_SECONDS, default 10 s). Its
# GetIndexStatus polls can wait behind a long vector-index upsert on a loaded 2-core box and
# fail the load with DEADLINE_EXCEEDED; the bench measures retrieval, so it gives them longer.
INGEST_DEADLINE_SECONDS = 60


def wait_until_retrieval_idle(data_dir: Path, give_up_s: float = 180.0) -> float:
    """Waits until the retrieval service is idle after a load: its embedded vector index
    rebuilds the HNSW graph in a child process once writes paused (OPTIMIZE_IDLE_SECONDS),
    and timed questions must not share the two cores with that build. Returns the wait."""
    import psutil

    from vera.services.retrieval.vectors.edge import OPTIMIZE_IDLE_SECONDS

    t0 = time.perf_counter()
    stack_pid = int(json.loads((data_dir / "run" / "stack.json").read_text())["pid"])
    retrieval = next(p for p in psutil.Process(stack_pid).children(recursive=True)
                     if "retrieval" in p.cmdline())
    time.sleep(OPTIMIZE_IDLE_SECONDS + 1)
    quiet_seconds = 0
    while quiet_seconds < 3 and time.perf_counter() - t0 < give_up_s:
        # Idle: the tailer's polls only, and no build running in a child.
        busy = retrieval.cpu_percent(interval=1.0) >= 10.0 or bool(retrieval.children())
        quiet_seconds = 0 if busy else quiet_seconds + 1
    return time.perf_counter() - t0


def ingest_all(conversations: list[locomo.Conversation], root: Path, data_dir: Path,
               env: dict[str, str], failures: list[dict],
               deadline_s: float = INGEST_DEADLINE_SECONDS) -> dict[str, float]:
    """`vera ingest` per conversation; a failed load is retried (and reported in failures)."""
    seconds: dict[str, float] = {}
    for conv in tqdm(conversations, desc="vera ingest", unit="conv", file=sys.stderr):
        path = locomo.write_jsonl(conv, root / f"{conv.project}.jsonl")
        seconds[conv.project] = ingest_file(path, conv.project, data_dir, env, failures,
                                            deadline_s)
    return seconds


def ingest_file(path: Path, project: str, data_dir: Path, env: dict[str, str],
                failures: list[dict], deadline_s: float = INGEST_DEADLINE_SECONDS) -> float:
    """`vera ingest PATH --project PROJECT`, retried when it fails (each failure reported in
    ``failures``); returns its seconds."""
    t0 = time.perf_counter()
    ingest_env = {**env, "VERA_RPC__DEADLINE_SECONDS": str(deadline_s)}
    for attempt in range(1, INGEST_ATTEMPTS + 1):
        done = subprocess.run(
            _vera_cmd("ingest", str(path), "--project", project, "--data-dir", str(data_dir)),
            env=ingest_env, capture_output=True, text=True, timeout=900, cwd=ROOT)
        if done.returncode == 0:
            break
        reason = _last_line(done.stderr) or _last_line(done.stdout)
        failures.append({"project": project, "attempt": attempt,
                         "exit_code": done.returncode, "reason": reason})
        tqdm.write(f"WARNING: vera ingest {project} attempt {attempt} failed "
                   f"({done.returncode}): {reason}", file=sys.stderr)
    else:
        raise RuntimeError(f"vera ingest {project} failed {INGEST_ATTEMPTS} times:\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    for line in reversed(lines):
        if "vera ingest" in line or "error" in line.lower() or "failed" in line:
            return line[-500:]
    return lines[-1][-500:] if lines else ""


def dsn_of_stack(stack_pid: int) -> str:
    import psutil

    for child in psutil.Process(stack_pid).children(recursive=True):
        try:
            env = child.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("VERA_DATABASE__DSN"):
            return env["VERA_DATABASE__DSN"]
    raise RuntimeError("no service of the stack shows VERA_DATABASE__DSN")


# --- MCP calls and scoring ------------------------------------------------------------


async def timed_call(client, name: str, args: dict, errors: list[dict], **where: str
                     ) -> tuple[dict | None, float]:
    """The call's structured answer (None for an error, the first 20 kept in ``errors``
    with ``where``) and its wall time in ms."""
    t0 = time.perf_counter()
    result = await client.call_tool(name, args)
    ms = (time.perf_counter() - t0) * 1000
    if result.is_error:
        if len(errors) < 20:
            errors.append({**where, "content": str(result.content)[:500]})
        return None, ms
    return result.structured_content, ms


async def call_tool(client, tool: str, args: dict, errors: list[dict]) -> dict | None:
    return (await timed_call(client, tool, args, errors, tool=tool))[0]


def ranking_from(payload: dict | None, conv: locomo.Conversation,
                  limit: int = LIMIT) -> list[list[str]]:
    """The top ``limit`` results' cited dia_ids, counting only citations of this
    conversation's sessions."""
    prefix = f"{conv.sample_id}-session_"
    results = sorted((payload or {}).get("results") or [],
                     key=lambda r: r.get("rank") if r.get("rank") is not None else math.inf)
    ranking = []
    for result in results[:limit]:
        locators = []
        for citation in result.get("citations") or []:
            source = citation.get("source_id") or ""
            locator = locomo.normalize_dia_id(citation.get("locator") or "")
            if locator and (not source or source.startswith(prefix)):
                locators.append(locator)
        ranking.append(locators)
    return ranking


def two_folds(conversations: list[locomo.Conversation]) -> tuple[list, list]:
    """Greedy split by question count (largest first onto the lighter fold), so both
    folds train and evaluate on about as many questions; stable for a given data file."""
    folds: tuple[list, list] = ([], [])
    for conv in sorted(conversations, key=lambda c: (-len(c.questions), c.sample_id)):
        lighter = min(folds, key=lambda f: sum(len(c.questions) for c in f))
        lighter.append(conv)
    return folds


def pool_tallies(tallies: list[Tally]) -> Tally:
    pooled = Tally()
    for tally in tallies:
        pooled.scores += tally.scores
        pooled.categories += tally.categories
        pooled.latencies_ms += tally.latencies_ms
        pooled.errors += tally.errors
    return pooled


# --- reports --------------------------------------------------------------------------


def render_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.ljust(w) if i < 2 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """The LoCoMo file, its subset and the load deadline (both learned-ranking benches)."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON file")
    parser.add_argument(
        "--conversations", type=int, default=0, help="use only the first N conversations"
    )
    parser.add_argument(
        "--max-questions",
        type=int,
        default=0,
        help="use only the first N questions of each conversation",
    )
    parser.add_argument(
        "--ingest-deadline",
        type=float,
        default=INGEST_DEADLINE_SECONDS,
        help="per-call deadline (s) of `vera ingest`",
    )
