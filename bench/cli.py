"""`scripts/bench NAME [ARGS]`: one subcommand per bench. Each bench's module parses its
own arguments (the function named here takes them and returns the exit code); `scripts/bench
NAME --help` lists them."""

from __future__ import annotations

import importlib
import sys

# name -> (module:function, what it measures)
BENCHES = {
    "locomo": ("bench.run:main", "retrieval quality on LoCoMo dev next to BM25 and dense"),
    "code-repos": ("bench.code_repos:main", "retrieval quality on code repository questions"),
    "fusion-cost": ("bench.fusion_cost:main", "issue 45 item 1's ranking terms off and on"),
    "scale": ("bench.scale:cli", "latency and load at 10k-1M generated facts"),
    "feedback": ("bench.feedback:cli", "the learned ranking stage fitted on feedback"),
    "rank-ablation": ("bench.rank_ablation:cli", "learned rankers over the signal vector"),
    "lexical-ablation": ("bench.lexical_ablation:cli", "the lexical leg in Qdrant, in process"),
    "hops": ("bench.hops:main", "each hop of knowledge_get_context"),
    "gateway-overhead": ("bench.gateway_overhead:main", "the gateway's own cost per call"),
    "tracing-overhead": ("bench.tracing_overhead:main", "get_context with tracing off and on"),
    "retrieval-start": ("bench.retrieval_start:cli", "a retrieval replica's start"),
    "memory-scale": ("bench.memory_scale:cli", "the in-process BM25 leg at scale"),
    "vector-scale": ("bench.vector_scale:main", "the embedded vector shard at scale"),
    "sparse-scale": ("bench.sparse_scale:cli", "Qdrant sparse vectors against in-process BM25"),
    "console": ("bench.console:main", "the console's review queue page"),
    "secret-screen": ("bench.secret_screen:main", "the credential screen per proposal"),
    "bulk-ingest": ("bench.bulk_ingest:cli", "`vera ingest` of 100k facts into a team stack"),
    "harvest": ("bench.harvest:main", "vera harvest of a 10,000-file repository to facts filed"),
    "load": ("bench.load.__main__:main", "open-loop load, knee and soak (scripts/load)"),
}


def usage() -> str:
    width = max(map(len, BENCHES))
    return "usage: scripts/bench NAME [ARGS]\n\n" + "\n".join(
        f"  {name:{width}}  {what}" for name, (_, what) in BENCHES.items())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if argv[0] not in BENCHES:
        print(f"scripts/bench: no bench {argv[0]!r}\n{usage()}", file=sys.stderr)
        return 2
    module, _, function = BENCHES[argv[0]][0].partition(":")
    return getattr(importlib.import_module(module), function)(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
