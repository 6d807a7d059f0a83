"""What issue 45 item 1's ranking terms cost a call: the retrieval service's ``search`` and
``assemble`` (what ``knowledge_search`` and ``knowledge_get_context`` run) with the fusion
as shipped and with those terms off, interleaved in one process.

    scripts/bench fusion-cost [--data PATH] [--rounds N]

The LoCoMo dev turns are indexed once as bench/ablation.py indexes them (the service's
FactMemory, qdrant-edge shard, int8 MiniLM and default rerank stage); two Retrievers share
them, one with ``pipeline.Fusion()`` and one with the entity bonus back at 0.2 and no time
bonus (commit 7a90749; these are not settings, so a stack cannot be started without them).
Each question is asked four ways in an order that rotates per question, so a noisy machine
slows all alike. The gateway, gRPC and the knowledge re-read add the same cost to both, so
the ratio through the stack is at most the in-process one; issue 45 item 2's target is 1.5.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from bench import locomo, record
from bench.ablation import BEFORE_ISSUE_45_ITEM_1, DictFacts, index_conversations
from bench.harness import DEFAULT_DATA, LIMIT, TOKEN_BUDGET
from bench.metrics import percentile
from vera.config import RetrievalSettings
from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.domain import Filters
from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT
from vera.services.retrieval.models.embedding import load_embedder
from vera.services.retrieval.models.rerankers import load_reranker
from vera.services.retrieval.pipeline.retriever import Fusion, Retriever

TARGET = 1.5
WARM_UP = 20


async def measure(conversations: list[locomo.Conversation], rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="vera-fusion-cost-") as tmp:
        embedder = await load_embedder(None, 2, Path(tmp),
                                       RetrievalSettings().embedding_precision)
        vectors, memory, facts = await index_conversations(conversations, embedder, Path(tmp),
                                                           "index")
        reranker = await load_reranker(None, None)
        lexical = DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT)
        fusions = {"off": Fusion(**BEFORE_ISSUE_45_ITEM_1), "shipped": Fusion()}
        retrievers = {name: Retriever(embedder, vectors, lexical, DictFacts(facts),
                                      candidate_pool=50, reranker=reranker, fusion=fusion,
                                      assembler_version="bench-fusion-cost")
                      for name, fusion in fusions.items()}

        async def call(kind: str, name: str, conv: locomo.Conversation, question: str):
            retriever = retrievers[name]
            if kind == "search":
                return await retriever.search([conv.project], question, LIMIT, Filters())
            return await retriever.assemble(conv.project, question, LIMIT, TOKEN_BUDGET,
                                            Filters(), compact=False)

        ways = [(kind, name) for kind in ("search", "context") for name in ("off", "shipped")]
        asked = [(conv, q.question) for conv in conversations for q in conv.questions]
        ms: dict[tuple[str, str], list[float]] = {way: [] for way in ways}
        for conv, question in asked[:WARM_UP]:
            for way in ways:
                await call(*way, conv, question)
        n = 0
        with tqdm(total=rounds * len(asked), desc="fusion cost", file=sys.stderr) as bar:
            for _ in range(rounds):
                for conv, question in asked:
                    n += 1
                    for way in ways[n % len(ways):] + ways[:n % len(ways)]:
                        t0 = time.perf_counter()
                        await call(*way, conv, question)
                        ms[way].append((time.perf_counter() - t0) * 1000)
                    bar.update(1)
        await lexical.close()
        await vectors.close()
        embedder.close()
    return {"calls_per_way": len(ms[ways[0]]), "facts": len(facts),
            "ms": {f"{kind} {name}": {"p50": percentile(v, 50), "p95": percentile(v, 95)}
                   for (kind, name), v in ms.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench fusion-cost",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON file")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the questions")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    report = asyncio.run(measure(locomo.load(args.data), args.rounds))
    wall_s = time.perf_counter() - wall
    rows = []
    for kind, tool in (("search", "search (knowledge_search)"),
                       ("context", "assemble (knowledge_get_context)")):
        off, on = report["ms"][f"{kind} off"], report["ms"][f"{kind} shipped"]
        rows.append([tool, off["p50"], on["p50"], off["p95"], on["p95"],
                     on["p50"] / off["p50"]])
    figures = record.table(
        [f"in process, {report['calls_per_way']} LoCoMo dev questions each",
         "terms off p50 ms", "shipped p50 ms", "terms off p95 ms", "shipped p95 ms",
         f"p50 ratio (target {TARGET})"], rows, digits=[None, 1, 1, 1, 1, 2])
    print("\n".join(record.as_markdown(figures)))
    print(f"wrote {record.write('fusion-cost', argv, [figures], wall_s=wall_s)}",
          file=sys.stderr)
    return 0 if all(row[-1] <= TARGET for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
