"""The retrieval process's FactMemory at scale, in process (no stack, no model).

    scripts/bench memory-scale [--sizes 10000,100000] [--small 1000] [--rounds 5]

Fills a FactMemory with the scale bench's generated corpus (bench/scale_corpus.py: one project
scope of N facts plus a few small scopes, random unit vectors of 384 dimensions) and
reports:

- the resident-set growth of filling it (VmRSS before and after) and the bytes each
  structure of the big scope holds (a deep size of each of its attributes), per fact;
- ``search`` + ``features`` (the lexical leg's two calls in one get_context, the
  service's candidate pool of 50) over questions generated from held facts plus a
  common-term query, in a small project and in the N-fact one of the same process,
  interleaved per query; medians and the large/small ratio, for the first round (each
  question asked once) and the rounds after it (asked again).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import random
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np

from bench import record

DIMENSIONS = 384
CANDIDATE_POOL = 50  # the service's default (RetrievalSettings.candidate_pool)
CONTEXT_WEIGHT = 0.7  # lexical.CONTEXT_WEIGHT
BATCH = 500  # facts per upsert, a change-log page
SMALL_SCOPES = 5
RECORDED = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)


def facts_of(n_facts: int, scope_id: str, seed: int) -> tuple[list[Any], list[str]]:
    """The scale corpus as the retrieval service's Facts (one scope), and its questions."""
    from bench import scale_corpus
    from vera.services.retrieval.domain import Citation, Fact

    corpus = scale_corpus.generate(n_facts, seed=seed, facts_per_file=max(n_facts, 1))
    ids = random.Random(seed)
    facts = []
    for records in corpus.files:
        for r in records:
            if r["type"] != "fact":
                continue
            valid_from = dt.datetime.fromisoformat(r["valid_from"].replace("Z", "+00:00"))
            facts.append(
                Fact(
                    fact_key=str(uuid.UUID(int=ids.getrandbits(128))),
                    version_id=str(uuid.UUID(int=ids.getrandbits(128))),
                    scope_id=scope_id,
                    subject=r["subject"],
                    predicate=r["predicate"],
                    object=r["object"],
                    trust_tier=r["trust_tier"],
                    authority=r["authority"],
                    valid_from=valid_from,
                    recorded_at=RECORDED,
                    repository=r.get("repository", ""),
                    code_path=r.get("code_path", ""),
                    document_type=r["document_type"],
                    source_type=r["document_type"],
                    citations=(Citation(source_id=r["source"], locator=r["locator"]),),
                )
            )
    return facts, [q.text for q in corpus.questions]


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(memory, facts: list[Any], rng: np.random.Generator, position: int) -> int:
    for start in range(0, len(facts), BATCH):
        batch = facts[start : start + BATCH]
        memory.upsert(batch, unit_vectors(rng, len(batch)), position)
        position += 1
    return position


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _children(obj: Any) -> Iterator[Any]:
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, list | tuple | set | frozenset):
        yield from obj
    elif isinstance(obj, np.ndarray):
        if obj.base is not None:
            yield obj.base
    elif not isinstance(obj, str | bytes | int | float | bool | type(None)):
        if hasattr(obj, "__dict__"):
            yield vars(obj)
        for name in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, name):
                yield getattr(obj, name)


def deep_size(root: Any, seen: set[int]) -> int:
    """Bytes reachable from ``root`` not already in ``seen`` (numpy buffers included)."""
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)  # an array owning its buffer counts it here
        stack.extend(_children(obj))
    return total


def breakdown(scope) -> dict[str, int]:
    """Deep bytes of each attribute of one scope, each object counted once (first owner)."""
    seen: set[int] = set()
    return {name: deep_size(value, seen) for name, value in vars(scope).items()}


def measure_memory(n_facts: int, seed: int) -> dict:
    from vera.services.retrieval.memory.facts import FactMemory

    facts, _ = facts_of(n_facts, "project", seed)
    small = [facts_of(200, f"small-{i}", seed + 10 + i)[0] for i in range(SMALL_SCOPES)]
    rng = np.random.default_rng(seed)
    gc.collect()
    before = rss_bytes()
    memory = FactMemory(DIMENSIONS)
    position = fill(memory, facts, rng, 1)
    for scope_facts in small:
        position = fill(memory, scope_facts, rng, position)
    del facts, small
    gc.collect()
    grown = rss_bytes() - before
    parts = breakdown(memory.scopes["project"])
    return {
        "facts": n_facts,
        "rss_delta_bytes": grown,
        "rss_bytes_per_fact": grown / (n_facts + 200 * SMALL_SCOPES),
        "scope_bytes_per_fact": sum(parts.values()) / n_facts,
        "scope_breakdown_bytes_per_fact": {
            k: round(v / n_facts, 1) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
        },
    }


def measure_queries(small_n: int, large_n: int, rounds: int, seed: int) -> dict:
    """search + features in a small and a large project of one memory, interleaved."""
    from vera.services.retrieval.domain import IndexQuery
    from vera.services.retrieval.memory.facts import FactMemory

    rng = np.random.default_rng(seed)
    memory = FactMemory(DIMENSIONS)
    small_facts, small_questions = facts_of(small_n, "small", seed)
    large_facts, large_questions = facts_of(large_n, "large", seed + 1)
    position = fill(memory, small_facts, rng, 1)
    fill(memory, large_facts, rng, position)
    del small_facts, large_facts
    common = "which service is deployed to the prod cluster with replicas"
    questions = list(zip(small_questions, large_questions, strict=False))[:100]
    questions.append((common, common))
    now = dt.datetime.now(dt.UTC)
    query_vector = unit_vectors(rng, 1)[0]

    def once(scope: str, text: str) -> float:
        query = IndexQuery(scope_ids=(scope,), as_of=now)
        t0 = time.perf_counter()
        found = memory.search(text, query, CANDIDATE_POOL, context_weight=CONTEXT_WEIGHT)
        memory.features((scope,), [c.version_id for c in found], query_vector, text, query)
        return time.perf_counter() - t0

    # The first round asks each question once (a term's weights are kept from its second
    # use until the next write); the later rounds ask the same questions again.
    times: dict[str, list[float]] = {"small": [], "large": []}
    first: dict[str, list[float]] = {"small": [], "large": []}
    for round_ in range(rounds):
        into = first if round_ == 0 else times
        for small_text, large_text in questions:
            into["small"].append(once("small", small_text))
            into["large"].append(once("large", large_text))
    if rounds == 1:
        times = first
    small_p50 = statistics.median(times["small"]) * 1000
    large_p50 = statistics.median(times["large"]) * 1000
    small_first = statistics.median(first["small"]) * 1000
    large_first = statistics.median(first["large"]) * 1000
    return {
        "small_facts": small_n,
        "large_facts": large_n,
        "queries": len(times["small"]),
        "small_p50_ms": round(small_p50, 3),
        "large_p50_ms": round(large_p50, 3),
        "ratio": round(large_p50 / small_p50, 2),
        "first_round_small_p50_ms": round(small_first, 3),
        "first_round_large_p50_ms": round(large_first, 3),
        "first_round_ratio": round(large_first / small_first, 2),
    }


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench memory-scale", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000", help="project sizes for memory")
    parser.add_argument("--small", type=int, default=1000, help="the small project (queries)")
    parser.add_argument("--large", type=int, default=100_000, help="the large one (queries)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="only the query timings")
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    tables, sizes = [], []
    if not args.no_memory:
        for size in (int(s) for s in args.sizes.split(",") if s):
            result = measure_memory(size, args.seed)
            sizes.append([size, result["rss_delta_bytes"] / 2**20, result["rss_bytes_per_fact"],
                          result["scope_bytes_per_fact"]])
            print(
                f"{size} facts: RSS +{result['rss_delta_bytes'] / 2**20:.1f} MiB, "
                f"{result['rss_bytes_per_fact']:.0f} B/fact (RSS), "
                f"{result['scope_bytes_per_fact']:.0f} B/fact (the project's structures)"
            )
            for name, per_fact in result["scope_breakdown_bytes_per_fact"].items():
                print(f"    {name:>14}: {per_fact:8.1f} B/fact")
    result = measure_queries(args.small, args.large, args.rounds, args.seed)
    print(
        f"search + features p50: {result['small_p50_ms']:.2f} ms at {args.small} facts, "
        f"{result['large_p50_ms']:.2f} ms at {args.large} facts "
        f"(x{result['ratio']}, {result['queries']} queries each, interleaved); the first "
        f"round: {result['first_round_small_p50_ms']:.2f} / "
        f"{result['first_round_large_p50_ms']:.2f} ms (x{result['first_round_ratio']})"
    )
    if sizes:
        tables.append(record.table(["project facts", "RSS growth MiB", "B/fact (RSS)",
                                    "B/fact (the project's structures)"], sizes,
                                   digits=[0, 1, 0, 0]))
    tables.append(record.table(
        ["search + features p50 ms", f"{args.small:,} facts", f"{args.large:,} facts", "x"],
        [["first round", result["first_round_small_p50_ms"],
          result["first_round_large_p50_ms"], result["first_round_ratio"]],
         ["asked again", result["small_p50_ms"], result["large_p50_ms"], result["ratio"]]],
        digits=[None, 2, 2, 2], title=f"{result['queries']} queries each, interleaved:"))
    record.write("memory-scale", argv, tables, wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
