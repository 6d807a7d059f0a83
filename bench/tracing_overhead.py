"""What tracing costs a knowledge_get_context call: the same questions against the same
data with the SDK installed but off (no OTEL_* variables), then on with every trace
sampled (``always_on``) and exported over OTLP/HTTP to a loopback sink.

    scripts/bench tracing-overhead [--conversations N] [--questions N] [--rounds N]

Starts ``vera up`` in a temporary data dir, ingests the first N LoCoMo conversations, times
get_context off, restarts the same data dir with tracing on and times it again; prints
p50/p95 of each and the on/off ratios. A diagnostic: run it once, on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import locomo, record
from bench.harness import DEFAULT_DATA, LIMIT, TOKEN_BUDGET, ingest_all, running_stack
from bench.metrics import percentile

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack


@contextmanager
def otlp_sink() -> Iterator[tuple[str, list[int]]]:
    """A loopback OTLP/HTTP endpoint that accepts and drops every export (sizes kept)."""
    sizes: list[int] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            sizes.append(len(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", sizes
    finally:
        server.shutdown()
        server.server_close()


async def measure(stack: LaunchedStack, conversations: list[locomo.Conversation], questions: int,
                  rounds: int) -> list[float]:

    samples: list[float] = []
    async with stack.mcp_client() as client:
        for _ in range(3):  # one-off costs (connections, caches, the first exports)
            await client.call_tool("knowledge_get_context", {
                "query": "warm up", "project": conversations[0].project})
        for _ in range(rounds):
            for conv in conversations:
                for q in conv.questions[:questions]:
                    args = {"query": q.question, "project": conv.project, "limit": LIMIT,
                            "token_budget": TOKEN_BUDGET}
                    t0 = time.perf_counter()
                    result = await client.call_tool("knowledge_get_context", args)
                    samples.append((time.perf_counter() - t0) * 1000)
                    assert not result.is_error, result.content
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench tracing-overhead", description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    conversations = locomo.load(args.data)[: args.conversations]
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="vera-tracing-") as tmp, otlp_sink() as (sink, sizes):
        root = Path(tmp)
        with running_stack(root) as (stack, data_dir, env):
            ingest_all(conversations, root, data_dir, env, [])
            results["off"] = asyncio.run(
                measure(stack, conversations, args.questions, args.rounds))
        traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink, "OTEL_EXPORTER_OTLP_PROTOCOL":
                  "http/protobuf", "OTEL_TRACES_SAMPLER": "always_on"}
        with running_stack(root, **traced) as (stack, _, _):
            results["on"] = asyncio.run(
                measure(stack, conversations, args.questions, args.rounds))
    tables = [
        record.table(["tracing", "n", "p50 ms", "p95 ms"],
                     [[name, len(values), percentile(values, 50), percentile(values, 95)]
                      for name, values in results.items()], digits=[None, 0, 1, 1]),
        record.table(["on / off", "p50", "p95"],
                     [["ratio", *(percentile(results["on"], q) / percentile(results["off"], q)
                                  for q in (50, 95))]], digits=[None, 2, 2]),
    ]
    for figures in tables:
        print("\n".join(record.as_markdown(figures)))
    print(f"exports received: {len(sizes)} ({sum(sizes) / 1e6:.1f} MB)")
    record.write("tracing-overhead", argv or [], tables, wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
