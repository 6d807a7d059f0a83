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
from typing import Any

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
    "- rerank (static late interaction)": (None, {"rerank": False}),
}


def turn_fact(conv: locomo.Conversation, index: int, turn: locomo.Turn):
    from vera.services.retrieval.domain import Citation, Fact

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
    """A fixed corpus as the pipeline's fact source: nothing in it ever changes."""

    facts: dict[str, Any]

    async def list_changes(self, after_position: int, page_size: int,
                           wait_seconds: float = 0.0):
        from vera.services.retrieval.domain import ChangePage

        return ChangePage(changes=[], head_position=after_position)

    async def batch_get_facts(self, scope_ids: Sequence[str], fact_keys: Sequence[str],
                              as_of: datetime | None, known_as_of: datetime | None):
        return [self.facts[k] for k in fact_keys if k in self.facts
                and self.facts[k].scope_id in scope_ids]


async def index_conversations(conversations: list[locomo.Conversation], embedder,
                              directory: Path, desc: str):
    """Every conversation's turns as facts, embedded into a qdrant-edge shard under
    ``directory`` and into a FactMemory as the indexer does; the graph built at the end.
    Returns (vector index, memory, facts by key)."""
    return await index_facts(
        [[turn_fact(conv, i, t) for i, t in enumerate(conv.turns)] for conv in conversations],
        embedder, directory, desc)


async def index_facts(batches: list[list], embedder, directory: Path, desc: str):
    """Each batch of retrieval facts (``vera.services.retrieval.domain.Fact``) embedded into a
    qdrant-edge shard under ``directory`` and into a FactMemory as the indexer does, one
    position per batch; the graph built at the end. Returns (vector index, memory, facts
    by key)."""
    from vera.services.retrieval.indexing.indexer import embedding_text
    from vera.services.retrieval.memory.facts import FactMemory
    from vera.services.retrieval.vectors.edge import EdgeVectorIndex

    vectors = await EdgeVectorIndex.open(directory / "vectors", embedder.dimensions)
    memory = FactMemory(embedder.dimensions)
    facts: dict[str, object] = {}
    for position, batch in enumerate(tqdm(batches, desc=desc, file=sys.stderr), start=1):
        vecs = await embedder.embed([embedding_text(f) for f in batch])
        await vectors.upsert(batch, vecs)
        memory.upsert(batch, vecs, position)
        facts.update({f.fact_key: f for f in batch})
    await vectors.optimize()
    return vectors, memory, facts


async def run(conversations: list[locomo.Conversation]) -> dict:
    from vera.config import RetrievalSettings
    from vera.services.retrieval.documents.index import DocumentIndex
    from vera.services.retrieval.domain import Filters
    from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT
    from vera.services.retrieval.models.embedding import load_embedder
    from vera.services.retrieval.models.rerankers import StaticTokenVectors, load_reranker
    from vera.services.retrieval.pipeline.retriever import Retriever, Stages

    report: dict = {"timings": {}}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vera-ablation-") as tmp:
        embedder = await load_embedder(
            None, 2, Path(tmp), RetrievalSettings().embedding_precision
        )
        report["embedder"] = embedder.backend
        vectors, memory, facts = await index_conversations(
            conversations, embedder, Path(tmp), "ablation index"
        )
        report["timings"]["index_s"] = time.perf_counter() - t0
        source = DictFacts(facts)
        reranker = await load_reranker(None, None)  # what the service runs by default
        results: dict[str, dict] = {}
        latencies: list[float] = []
        embed_ms: list[float] = []
        for name, (context_weight, stage_flags) in CONFIGS.items():
            lexical = DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT
                                     if context_weight is None else context_weight)
            retriever = Retriever(embedder, vectors, lexical, source, candidate_pool=50,
                                  reranker=reranker, stages=Stages(**stage_flags),
                                  assembler_version="bench-ablation")
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
        rows, report["fusion"] = await fusion_rows(
            conversations, embedder, vectors,
            lambda: DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT),
            source, reranker)
        results.update(rows)
        rows, report["rerank"] = await rerank_rows(
            conversations, embedder, vectors,
            lambda: DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT),
            source, facts, label=" (contextual token vectors)")
        results.update(rows)
        rows, report["rerank_static"] = await rerank_rows(
            conversations, embedder, vectors,
            lambda: DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT),
            source, facts, StaticTokenVectors.load_sync(), " (static token vectors)")
        results.update(rows)
        await vectors.close()
        embedder.close()
    from bench.metrics import percentile
    report["configs"] = results
    report["in_process_ms"] = {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)}
    report["embed_ms"] = {"p50": percentile(embed_ms, 50), "p95": percentile(embed_ms, 95)}
    report["timings"]["total_s"] = time.perf_counter() - t0
    return report


# Late-interaction rerank: blend weights tried by the out-of-fold calibration (fold A = the
# even conversations, fold B = the odd ones; each fold is scored with the other's weight).
RERANK_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 100.0)
UNCACHED_CALLS = 30
RERANK_NAIVE = "rerank variant: MaxSim, weight 0.5"
RERANK_CALIBRATED = "rerank variant: MaxSim, weight calibrated out of fold"


class RecordingReranker:
    """The late-interaction reranker, recording each call's short list (fused score and
    MaxSim per key, the whole re-read order) and timing its own cost."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[tuple[list[str], dict[str, tuple[float, float]]]] = []
        self.ms: list[float] = []

    async def rerank(self, query, keys, fused, texts):
        # The first UNCACHED_CALLS pay the full cost (what a service pays per query); after
        # them the facts' token vectors are cached so the pass stays fast.
        if len(self.calls) == UNCACHED_CALLS:
            self.inner.cache = {}
        started = time.perf_counter()
        sims = await self.inner.maxsim_scores(query, keys, texts)
        self.ms.append((time.perf_counter() - started) * 1000)
        self.calls.append((list(keys), {k: (fused[k][2], s) for k, s in sims.items()}))
        return {k: fused[k][2] + self.inner.weight * s for k, s in sims.items()}


def reranked_order(keys: list[str], short: dict[str, tuple[float, float]],
                   weight: float) -> list[str]:
    """The pipeline's order for a blend weight: the short list by fused + weight * MaxSim
    (ties by key), then the rest in fused order (no binding boosts in the benchmark)."""
    head = sorted(short, key=lambda k: (-(short[k][0] + weight * short[k][1]), k))
    return head + [k for k in keys if k not in short]


def tally_weights(records: list[dict], weight_of, facts: dict) -> Tally:
    tally = Tally()
    for rec in records:
        order = reranked_order(rec["keys"], rec["short"], weight_of(rec))[:LIMIT]
        ranking = [[c.locator for c in facts[k].citations] for k in order]
        tally.add(ranking, rec["evidence"], rec["category"])
    return tally


def _objective(summary: dict) -> float:
    return summary["hit@5"] + summary["mrr@10"]


async def rerank_rows(conversations, embedder, vectors, lexical_factory, source,
                      facts: dict, token_source=None,
                      label: str = "") -> tuple[dict[str, dict], dict]:
    """The pipeline with a late-interaction reranker over ``token_source`` (default: the
    embedder's contextual token vectors) in place of the default stage: the naive fixed
    weight and the weight calibrated on one fold of conversations and scored on the
    other."""
    from vera.services.retrieval.models.rerankers import (
        LATE_INTERACTION_WEIGHT,
        LateInteractionReranker,
    )
    from vera.services.retrieval.pipeline.retriever import Retriever

    recorder = RecordingReranker(LateInteractionReranker(token_source or embedder,
                                                          weight=LATE_INTERACTION_WEIGHT))
    lexical = lexical_factory()
    retriever = Retriever(embedder, vectors, lexical, source, candidate_pool=50,
                          reranker=recorder,
                          assembler_version="bench-ablation")
    from vera.services.retrieval.domain import Filters

    records: list[dict] = []
    latencies: list[float] = []
    for fold, conv in enumerate(tqdm(conversations, desc=f"rerank{label}", file=sys.stderr)):
        for q in conv.questions:
            calls = len(recorder.calls)
            started = time.perf_counter()
            await retriever.search([conv.project], q.question, LIMIT, Filters())
            latencies.append((time.perf_counter() - started) * 1000)
            keys, short = recorder.calls[-1] if len(recorder.calls) > calls else ([], {})
            records.append({"fold": fold % 2, "keys": keys, "short": short,
                            "evidence": q.evidence,
                            "category": locomo.CATEGORY_NAMES.get(q.category, str(q.category))})
    await lexical.close()
    chosen: dict[int, float] = {}
    grid: dict[int, dict[str, float]] = {}
    for fold in (0, 1):
        train = [r for r in records if r["fold"] == fold]
        if not train:
            chosen[fold] = LATE_INTERACTION_WEIGHT
            continue
        scores = {w: _objective(tally_weights(train, lambda r, w=w: w, facts).summary())
                  for w in RERANK_WEIGHTS}
        grid[fold] = {str(w): round(v, 4) for w, v in scores.items()}
        chosen[fold] = max(RERANK_WEIGHTS, key=lambda w: (scores[w], -w))
    rows = {}
    for name, weight_of in ((RERANK_NAIVE, lambda r: LATE_INTERACTION_WEIGHT),
                            (RERANK_CALIBRATED, lambda r: chosen[1 - r["fold"]])):
        tally = tally_weights(records, weight_of, facts)
        rows[name + label] = {**tally.summary(), "by_category": tally.by_category()}
    from bench.metrics import percentile
    cold, warm = recorder.ms[:UNCACHED_CALLS], recorder.ms[UNCACHED_CALLS:]
    info = {"rerank_uncached_ms": {"p50": percentile(cold, 50), "p95": percentile(cold, 95)},
            "rerank_cached_ms": {"p50": percentile(warm, 50), "p95": percentile(warm, 95)},
            "pipeline_with_rerank_uncached_ms": {
                "p50": percentile(latencies[:UNCACHED_CALLS], 50),
                "p95": percentile(latencies[:UNCACHED_CALLS], 95)},
            "short_list": recorder.inner.limit,
            "weights_chosen": {"fold A (scores B)": chosen[0], "fold B (scores A)": chosen[1]},
            "objective_grid": grid}
    return rows, info


# The fusion study: how the legs are put on one scale and weighted, and the bonuses a
# fact earns (pipeline.Fusion), each variant run over every question; then
# leave-one-conversation-out: each conversation is scored by the variant that did best on
# the other conversations.
FUSION_VARIANTS: dict[str, dict] = {
    "fusion: as served (best scale, dense weight 0.5, entity bonus 0.3, time bonus 0.2)": {},
    **{f"fusion: {scale}, dense weight {w}": {"scale": scale, "dense_weight": w,
                                             "lexical_weight": round(1.0 - w, 3)}
       for scale, w in (("minmax", 0.4), ("minmax", 0.5), ("zscore", 0.5))},
    "fusion: entity bonus 0.2 (before)": {"entity_bonus": 0.2},
    **{f"fusion: time bonus {b}": {"time_bonus": b} for b in (0.0, 0.1)},
}
FUSION_LOCO = "fusion chosen leave-one-conversation-out"
# The fusion before issue 45 item 1 (commit 7a90749): entity bonus 0.2, no time bonus; the
# code-repos and fusion-cost benches compare the shipped fusion against it.
BEFORE_ISSUE_45_ITEM_1: dict[str, Any] = {"entity_bonus": 0.2, "time_bonus": 0.0}


def _loco_objective(summary: dict) -> float:
    return summary["hit@5"] + summary["recall@10"]


async def fusion_rows(conversations, embedder, vectors, lexical_factory, source,
                      reranker, variants: dict[str, dict] | None = None
                      ) -> tuple[dict[str, dict], dict]:
    """Every fusion variant's quality, and each conversation scored by the variant chosen
    without it."""
    from bench.metrics import percentile
    from vera.services.retrieval.domain import Filters
    from vera.services.retrieval.pipeline.retriever import Fusion, Retriever

    # variant -> conversation -> [(ranking, evidence, category)]
    answers: dict[str, dict[str, list[tuple]]] = {}
    latencies: dict[str, list[float]] = {}
    fusions = {name: Fusion(**kwargs)
               for name, kwargs in (variants or FUSION_VARIANTS).items()}
    lexical = lexical_factory()
    for name, fusion in fusions.items():
        retriever = Retriever(embedder, vectors, lexical, source, candidate_pool=50,
                              reranker=reranker, fusion=fusion,
                              assembler_version="bench-ablation")
        answers[name] = {}
        for conv in tqdm(conversations, desc=name, file=sys.stderr):
            answered = answers[name].setdefault(conv.sample_id, [])
            for q in conv.questions:
                started = time.perf_counter()
                outcome = await retriever.search([conv.project], q.question, LIMIT, Filters())
                latencies.setdefault(name, []).append((time.perf_counter() - started) * 1000)
                ranking = [[c.locator for c in r.fact.citations] for r in outcome.results]
                answered.append((ranking, q.evidence,
                                 locomo.CATEGORY_NAMES.get(q.category, str(q.category))))
    await lexical.close()

    def tally(picks: dict[str, str]) -> Tally:
        t = Tally()
        for conv in conversations:
            for ranking, evidence, category in answers[picks[conv.sample_id]][conv.sample_id]:
                t.add(ranking, evidence, category)
        return t

    rows: dict[str, dict] = {}
    for name in fusions:
        t = tally({c.sample_id: name for c in conversations})
        # In-process latency per variant, in the same run (the cost of what a variant adds).
        rows[name] = {**t.summary(), "by_category": t.by_category(),
                      "p50_ms": percentile(latencies[name], 50)}
    chosen: dict[str, str] = {}
    order = {name: i for i, name in enumerate(fusions)}
    for held_out in conversations:
        others = [c for c in conversations if c is not held_out] or [held_out]
        scores = {}
        for name in fusions:
            t = Tally()
            for conv in others:
                for ranking, evidence, category in answers[name][conv.sample_id]:
                    t.add(ranking, evidence, category)
            scores[name] = _loco_objective(t.summary())
        # Ties go to the variant listed first (the service's own fusion).
        chosen[held_out.sample_id] = max(fusions, key=lambda n: (scores[n], -order[n]))
    t = tally(chosen)
    rows[FUSION_LOCO] = {**t.summary(), "by_category": t.by_category()}
    return rows, {"chosen": chosen, "objective": "hit@5 + recall@10 on the other conversations"}



def main_sync(conversations: list[locomo.Conversation]) -> dict:
    return asyncio.run(run(conversations))
