"""In-process ablation of the retrieval pipeline on LoCoMo: each ranking stage on and off.

The same Retriever, FactMemory (BM25 + neighbour field + stored vectors), qdrant-edge HNSW
index and MiniLM embedder the service uses, without the gateway, gRPC and PostgreSQL: the
facts are the turns of bench/locomo.py, the authoritative re-read is a dict. Reports the
quality of every configuration and the in-process latency of the full pipeline (the
denominator of the MCP overhead ratio) next to one query embedding alone (the floor).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tqdm import tqdm

from bench import locomo
from bench.metrics import Tally

LIMIT = 10
# name -> (lexical context weight, Stages kwargs)
CONFIGS: dict[str, tuple[float | None, dict[str, bool]]] = {
    "full pipeline": (None, {}),
    "- neighbour field (BM25)": (0.0, {}),
    "- neighbour vector": (None, {"dense_context": False}),
    "- entity mentions": (None, {"entities": False}),
    "- all three (BM25 + dense, calibrated)": (0.0, {"dense_context": False,
                                                   "entities": False}),
}


def turn_fact(conv: locomo.Conversation, index: int, turn: locomo.Turn):
    from vera.services.retrieval.model import Citation, Fact

    return Fact(
        fact_key=f"{conv.sample_id}:{turn.dia_id}",
        version_id=f"{conv.sample_id}:{turn.dia_id}:v1",
        scope_id=conv.project,
        subject=turn.speaker,
        predicate=locomo.PREDICATE,
        object=turn.text,
        valid_from=turn.valid_from,
        document_type="conversation",
        citations=(Citation(source_id=turn.source_id, locator=turn.dia_id),),
    )


@dataclass
class DictFacts:
    facts: dict[str, object]

    async def batch_get_facts(self, scope_ids: Sequence[str], fact_keys: Sequence[str],
                              as_of: datetime | None, known_as_of: datetime | None):
        return [self.facts[k] for k in fact_keys if k in self.facts
                and self.facts[k].scope_id in scope_ids]


async def run(conversations: list[locomo.Conversation]) -> dict:
    from vera.services.retrieval.embedding import load_embedder
    from vera.services.retrieval.indexer import embedding_text
    from vera.services.retrieval.lexical import CONTEXT_WEIGHT, PgLexicalIndex
    from vera.services.retrieval.memory import FactMemory
    from vera.services.retrieval.model import Filters
    from vera.services.retrieval.pipeline import Retriever, Stages
    from vera.services.retrieval.vector_edge import EdgeVectorIndex

    report: dict = {"timings": {}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vera-ablation-") as tmp:
        embedder = await load_embedder(None, 2, Path(tmp))
        report["embedder"] = embedder.backend
        vectors = await EdgeVectorIndex.open(Path(tmp) / "vectors", embedder.dimensions)
        memory = FactMemory(embedder.dimensions)
        facts: dict[str, object] = {}
        for position, conv in enumerate(tqdm(conversations, desc="ablation index",
                                             file=sys.stderr), start=1):
            batch = [turn_fact(conv, i, t) for i, t in enumerate(conv.turns)]
            vecs = await embedder.embed([embedding_text(f) for f in batch])
            await vectors.upsert(batch, vecs)
            memory.upsert(batch, vecs, position)
            facts.update({f.fact_key: f for f in batch})
        await vectors.optimize()
        report["timings"]["index_s"] = time.perf_counter() - t0
        source = DictFacts(facts)
        results: dict[str, dict] = {}
        latencies: list[float] = []
        embed_ms: list[float] = []
        for name, (context_weight, stage_flags) in CONFIGS.items():
            lexical = PgLexicalIndex(None, memory, context_weight=CONTEXT_WEIGHT
                                     if context_weight is None else context_weight)
            retriever = Retriever(embedder, vectors, lexical, source, candidate_pool=50,
                                  stale_source_days=100_000, features=lexical,
                                  stages=Stages(**stage_flags))
            tally = Tally()
            for conv in tqdm(conversations, desc=name, file=sys.stderr):
                for q in conv.questions:
                    started = time.perf_counter()
                    outcome = await retriever.search([conv.project], q.question, LIMIT,
                                                     Filters())
                    ms = (time.perf_counter() - started) * 1000
                    if name == "full pipeline":
                        latencies.append(ms)
                        e0 = time.perf_counter()
                        await embedder.embed([q.question])
                        embed_ms.append((time.perf_counter() - e0) * 1000)
                    ranking = [[c.locator for c in r.fact.citations] for r in outcome.results]
                    category = locomo.CATEGORY_NAMES.get(q.category, str(q.category))
                    tally.add(ranking, q.evidence, category, ms)
            await lexical.close()
            results[name] = {**tally.summary(), "by_category": tally.by_category()}
        await vectors.close()
        embedder.close()
    from bench.metrics import percentile
    report["configs"] = results
    report["in_process_ms"] = {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)}
    report["embed_ms"] = {"p50": percentile(embed_ms, 50), "p95": percentile(embed_ms, 95)}
    report["timings"]["total_s"] = time.perf_counter() - t0
    return report


def main_sync(conversations: list[locomo.Conversation]) -> dict:
    return asyncio.run(run(conversations))
