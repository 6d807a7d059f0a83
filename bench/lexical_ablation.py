"""Can Qdrant hold the lexical leg? ``scripts/bench lexical-ablation``.

    scripts/bench lexical-ablation [--data PATH] [--conversations N] [--out PATH]

In process, as bench/ablation.py: the same Retriever, FactMemory, qdrant-edge vector index
and MiniLM embedder the service uses, over the LoCoMo turns. Only the lexical leg's
``search`` changes between rows; the exact features (dense cosine, neighbour vector,
entity mentions) still come from the FactMemory, so each row measures the lexical
formulation alone. Every formulation keeps the leg's two fields: the fact's own text and
its neighbours' text (CONTEXT_WINDOW turns either side in its source), summed as
``own + CONTEXT_WEIGHT * context``.

- memory BM25: today's leg (memory.py), statistics per scope.
- qdrant text index: the project's own terms (text.terms: stopwords, Snowball), written
  space-separated into two payload fields with a whitespace text index that scores
  (TextIndexParams scoring), queried with ``TextQuery`` per field and summed by a
  ``Formula`` over the two prefetches. Qdrant keeps the statistics (N, df, average length)
  per shard, i.e. per deployment, not per scope.
- qdrant sparse, IDF modifier: two named sparse vectors whose values are the client-side
  BM25 term weight (saturation and length normalisation over the deployment's average
  length), the IDF applied by Qdrant (``Modifier.Idf``); the query is its terms at 1.0.
- qdrant Bm25 model: Qdrant's own ``Bm25`` document/query embedding (its tokenizer,
  English stopwords and Snowball stemmer) into the same two sparse vectors with IDF.

Per row: hit@5, recall@10 and MRR@10 of the whole pipeline, the lexical leg alone
(hit@5 and recall@50 of its own ranking: how many evidence turns it brings to the fusion),
the overlap of its top 50 with today's, and the leg's p50 latency, all in one run.
Writes ``bench-results/lexical_ablation.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from bench import locomo, record
from bench.ablation import DictFacts, turn_fact
from bench.harness import DEFAULT_DATA, ROOT
from bench.metrics import Tally, percentile, recall_at
from bench.record import machine_info

DEFAULT_OUT = ROOT / "bench-results" / "lexical_ablation.json"
LIMIT = 10
POOL = 50  # the service's candidate_pool: what the lexical leg hands the fusion
# Each field's prefetch in Qdrant: a fact found by one field only scores 0 in the other.
PREFETCH = 4 * POOL


def term_id(term: str) -> int:
    """A stable sparse dimension per term (crc32: a collision only merges two terms)."""
    return zlib.crc32(term.encode("utf-8"))


def query_terms(text: str):
    """The query as a sparse vector: each of its terms once, at 1.0 (Qdrant's IDF modifier
    supplies the weight)."""
    import qdrant_edge as edge

    from vera.services.retrieval.memory.text import terms

    ids = sorted({term_id(t) for t in terms(text)})
    return edge.SparseVector(indices=ids, values=[1.0] * len(ids))


def bm25_weight(tf: float, length: float, average: float, k1: float, b: float) -> float:
    return tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * length / (average or 1.0)))


class Fields:
    """Every fact's own terms and its neighbours' terms, read off a filled FactMemory (the
    neighbours are memory.py's, so every row compares the same two fields)."""

    def __init__(self, memory, facts: dict[str, Any]) -> None:
        from vera.services.retrieval.memory.facts import fact_text
        from vera.services.retrieval.memory.text import terms

        self.own: dict[str, list[str]] = {}
        self.context: dict[str, list[str]] = {}
        self.raw_own: dict[str, str] = {}
        self.raw_context: dict[str, str] = {}
        for scope in memory.scopes.values():
            versions = scope.version_ids
            texts = {v: fact_text(facts[v.rsplit(":", 1)[0]]) for v in versions}
            for version in versions:
                self.own[version] = terms(texts[version])
                self.raw_own[version] = texts[version]
            for slot, version in enumerate(versions):
                neighbours = [versions[s] for s in scope.nb[slot] if s >= 0]
                self.context[version] = [t for n in neighbours for t in self.own[n]]
                self.raw_context[version] = " ".join(texts[n] for n in neighbours)


class QdrantLexical:
    """One formulation of the lexical leg over a qdrant-edge shard; ``search`` as
    ports.SearchIndex's, the rest delegated to today's leg (``fallback``)."""

    def __init__(
        self,
        shards: dict[str, Any],
        fallback,
        embed_query: Callable[[str], Any] | None,
        mode: str,
        context_weight: float,
        prefetch: int = PREFETCH,
    ) -> None:
        self._shards = shards  # scope -> shard, or "" -> the one shard of every scope
        self._prefetch = prefetch
        self._fallback = fallback
        self._embed_query = embed_query
        self._mode = mode
        self._context_weight = context_weight
        self.ms: list[float] = []

    def search_sync(self, text: str, query, limit: int):
        import qdrant_edge as edge

        from vera.services.retrieval.vectors.edge import candidates, edge_filter

        where = edge_filter(query)
        if self._mode.startswith("text"):
            from vera.services.retrieval.memory.text import terms

            words = " ".join(dict.fromkeys(terms(text)))
            if not words:
                return []
            legs: list[Any] = [edge.TextQuery("own", words), edge.TextQuery("context", words)]
        else:
            assert self._embed_query is not None  # every sparse mode embeds its query
            vector = self._embed_query(text)
            if not vector.indices:
                return []
            legs = [
                edge.Query.Nearest(vector, using="own"),
                edge.Query.Nearest(vector, using="context"),
            ]
        formula = edge.Formula(
            edge.Expression.Sum(
                [
                    edge.Expression.Variable("$score[0]"),
                    edge.Expression.Mult(
                        [
                            edge.Expression.Constant(self._context_weight),
                            edge.Expression.Variable("$score[1]"),
                        ]
                    ),
                ]
            ),
            defaults={"$score[0]": 0.0, "$score[1]": 0.0},
        )
        shard = self._shards.get("") or self._shards[query.scope_ids[0]]
        params = None
        if self._mode.startswith("sparse-tenant"):
            # IDF over the query's scopes (every version in them, as memory.py counts), not
            # over the whole deployment.
            corpus = edge.Filter(
                must=[
                    edge.FieldCondition(
                        key="scope_id", match=edge.MatchAny(any=list(query.scope_ids))
                    )
                ]
            )
            params = edge.SearchParams(idf=edge.IdfParams(corpus=corpus))
        points = shard.query(
            edge.QueryRequest(
                limit=limit,
                query=formula,
                filter=where,
                with_payload=["fact_key", "version_id"],
                prefetches=[
                    edge.Prefetch(limit=self._prefetch, query=leg, filter=where, params=params)
                    for leg in legs
                ],
            )
        )
        return [c for c in candidates(points) if c.score > 0]

    async def search(self, text: str, query, limit: int):
        started = time.perf_counter()
        found = await asyncio.to_thread(self.search_sync, text, query, limit)
        self.ms.append((time.perf_counter() - started) * 1000)
        return found

    async def has_documents(self, query, *, with_attributes: bool) -> bool:
        return await self._fallback.has_documents(query, with_attributes=with_attributes)

    async def features(self, scope_ids, version_ids, vector, query_text, query=None):
        return await self._fallback.features(scope_ids, version_ids, vector, query_text, query)


def new_shard(path: Path, mode: str):
    import qdrant_edge as edge

    from vera.services.retrieval.vectors.edge import PAYLOAD_INDEXES

    # The text-index row writes no vectors, but a shard needs a vector config.
    idf = edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)
    config = edge.EdgeConfig(vectors={}, sparse_vectors={"own": idf, "context": idf})
    path.mkdir(parents=True)
    shard = edge.EdgeShard.create(str(path), config)
    for key, schema in PAYLOAD_INDEXES:
        shard.update(edge.UpdateOperation.create_field_index(key, schema))
    if mode.startswith("text"):
        # The terms arrive tokenized, stemmed and without stopwords (text.terms): the index
        # only splits on spaces, so both legs see exactly the same terms.
        words = edge.TextIndexParams(
            tokenizer=edge.TokenizerType.Whitespace,
            lowercase=False,
            stemmer=edge.DisabledStemmer(),
            scoring=True,
        )
        for field in ("own", "context"):
            shard.update(edge.UpdateOperation.create_field_index(field, words))
    return shard


def fill(shard, mode: str, facts: Sequence[Any], fields: Fields, bm25_models=None) -> None:
    import qdrant_edge as edge

    from vera.services.retrieval.memory.facts import K1, B
    from vera.services.retrieval.vectors.payload import payload, point_id

    # Length normalisation over the average of every fact written here, or of its scope's.
    groups: dict[str, list[str]] = {}
    for fact in facts:
        groups.setdefault(fact.scope_id if mode.endswith("scope-average") else "", []).append(
            fact.version_id
        )
    averages = {
        (group, name): sum(len(getattr(fields, name)[v]) for v in versions) / len(versions)
        for group, versions in groups.items()
        for name in ("own", "context")
    }

    def sparse(terms: list[str], name: str, scope_id: str):
        average = averages.get((scope_id, name)) or averages[("", name)]
        counts = Counter(terms)
        length = float(len(terms))
        by_id: dict[int, float] = {}
        for term, tf in counts.items():
            by_id[term_id(term)] = by_id.get(term_id(term), 0.0) + bm25_weight(
                tf, length, average, K1, B
            )
        return edge.SparseVector(indices=list(by_id), values=list(by_id.values()))

    points = []
    for fact in facts:
        v = fact.version_id
        body = payload(fact)
        if mode.startswith("text"):
            body = {**body, "own": " ".join(fields.own[v]), "context": " ".join(fields.context[v])}
            vector: dict = {}
        elif mode.startswith("sparse"):
            vector = {
                "own": sparse(fields.own[v], "own", fact.scope_id),
                "context": sparse(fields.context[v], "context", fact.scope_id),
            }
        else:
            own_model, context_model = bm25_models
            vector = {
                "own": own_model.embed_document(fields.raw_own[v]),
                "context": context_model.embed_document(fields.raw_context[v]),
            }
        points.append(edge.Point(id=point_id(v), vector=vector, payload=body))
    for start in range(0, len(points), 500):
        shard.update(edge.UpdateOperation.upsert_points(points[start : start + 500]))
    shard.optimize()


async def run(conversations: list[locomo.Conversation]) -> dict:
    import qdrant_edge as edge

    from vera.config import RetrievalSettings
    from vera.services.retrieval.documents.index import DocumentIndex
    from vera.services.retrieval.domain import Filters, IndexQuery
    from vera.services.retrieval.indexing.indexer import embedding_text
    from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT, FactMemory
    from vera.services.retrieval.models.embedding import load_embedder
    from vera.services.retrieval.models.rerankers import load_reranker
    from vera.services.retrieval.pipeline.retriever import Retriever
    from vera.services.retrieval.vectors.edge import EdgeVectorIndex

    report: dict[str, Any] = {"machine": machine_info(), "rows": {}}
    with tempfile.TemporaryDirectory(prefix="vera-lexical-ablation-") as tmp:
        embedder = await load_embedder(None, 2, Path(tmp), RetrievalSettings().embedding_precision)
        vectors = await EdgeVectorIndex.open(Path(tmp) / "vectors", embedder.dimensions)
        memory = FactMemory(embedder.dimensions)
        facts: dict[str, Any] = {}
        ordered: list[Any] = []
        for position, conv in enumerate(
            tqdm(conversations, desc="index", file=sys.stderr), start=1
        ):
            batch = [turn_fact(conv, i, t) for i, t in enumerate(conv.turns)]
            vecs = await embedder.embed([embedding_text(f) for f in batch])
            await vectors.upsert(batch, vecs)
            memory.upsert(batch, vecs, position)
            facts.update({f.fact_key: f for f in batch})
            ordered += batch
        await vectors.optimize()
        fields = Fields(memory, facts)
        today = DocumentIndex(None, memory, context_weight=CONTEXT_WEIGHT)
        averages = {
            name: sum(len(getattr(fields, name)[f.version_id]) for f in ordered) / len(ordered)
            for name in ("own", "context")
        }
        bm25_models = tuple(
            edge.Bm25(edge.Bm25Config(avg_len=averages[name], language="english"))
            for name in ("own", "context")
        )

        legs: dict[str, Any] = {"memory BM25 (today, per scope)": None}
        for name, mode, embed_query in (
            ("qdrant text index (project terms)", "text", None),
            ("qdrant text index, one shard per scope", "text-per-scope", None),
            ("qdrant sparse + IDF (client BM25 weights)", "sparse", query_terms),
            ("qdrant sparse + IDF over the query's scopes", "sparse-tenant", query_terms),
            ("  ... and each scope's average length", "sparse-tenant-scope-average", query_terms),
            ("qdrant Bm25 model (its tokenizer)", "bm25", bm25_models[0].embed_query),
        ):
            started = time.perf_counter()
            by_scope: dict[str, list[Any]] = (
                {f.scope_id: [] for f in ordered} if mode == "text-per-scope" else {"": []})
            for f in ordered:
                by_scope[f.scope_id if mode == "text-per-scope" else ""].append(f)
            shards = {}
            for number, (scope, members) in enumerate(by_scope.items()):
                shards[scope] = new_shard(Path(tmp) / f"{mode}-{number}", mode)
                fill(shards[scope], mode, members, fields, bm25_models)
            report.setdefault("fill_s", {})[name] = round(time.perf_counter() - started, 2)
            legs[name] = QdrantLexical(shards, today, embed_query, mode, CONTEXT_WEIGHT)
        reranker = await load_reranker(None, None)
        baseline_top: dict[tuple[str, str], list[str]] = {}
        for name, leg in legs.items():
            lexical = leg or today
            retriever = Retriever(
                embedder,
                vectors,
                lexical,
                DictFacts(facts),
                candidate_pool=POOL,
                reranker=reranker,
                assembler_version="bench-lexical-ablation",
            )
            pipeline, alone = Tally(), Tally()
            recall50: list[float] = []
            overlap: list[float] = []
            leg_ms: list[float] = []
            for conv in tqdm(conversations, desc=name, file=sys.stderr):
                for q in conv.questions:
                    outcome = await retriever.search([conv.project], q.question, LIMIT, Filters())
                    category = locomo.CATEGORY_NAMES.get(q.category, str(q.category))
                    ranking = [[c.locator for c in r.fact.citations] for r in outcome.results]
                    pipeline.add(ranking, q.evidence, category)
                    index_query = IndexQuery(scope_ids=(conv.project,), as_of=datetime.now(UTC))
                    started = time.perf_counter()
                    found = await lexical.search(q.question, index_query, POOL)
                    leg_ms.append((time.perf_counter() - started) * 1000)
                    keys = [c.fact_key for c in found]
                    cited = [[c.locator for c in facts[k].citations] for k in keys]
                    alone.add(cited, q.evidence, category)
                    recall50.append(recall_at(cited, q.evidence, POOL))
                    base = baseline_top.setdefault((conv.project, q.question), keys)
                    overlap.append(len(set(keys) & set(base)) / max(len(base), 1))
            whole = pipeline.summary()
            report["rows"][name] = {
                "pipeline": {k: whole[k] for k in ("hit@5", "recall@10", "mrr@10")},
                "by_category_hit@5": {c: v["hit@5"] for c, v in pipeline.by_category().items()},
                "lexical_alone": {
                    "hit@5": alone.summary()["hit@5"],
                    "recall@50": sum(recall50) / len(recall50),
                },
                "top50_overlap_with_today": sum(overlap) / len(overlap),
                "lexical_ms_p50": percentile(leg_ms, 50),
            }
        await vectors.close()
        embedder.close()
    return report


def figures(report: dict) -> dict:
    """The table the bench prints and keeps as its record (bench/record.py)."""
    rows = [[name, row["pipeline"]["hit@5"], row["pipeline"]["recall@10"],
             row["pipeline"]["mrr@10"], row["lexical_alone"]["hit@5"],
             row["lexical_alone"]["recall@50"], row["top50_overlap_with_today"],
             row["lexical_ms_p50"]] for name, row in report["rows"].items()]
    return record.table(["lexical leg", "hit@5", "recall@10", "MRR@10", "leg alone hit@5",
                         "leg recall@50", "top-50 overlap with today", "leg p50 ms"],
                        rows, digits=[None, 3, 3, 3, 3, 3, 3, 2])


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench lexical-ablation", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON file")
    parser.add_argument(
        "--conversations",
        type=int,
        default=None,
        help="only the first N conversations (a quick run)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    conversations = locomo.load(args.data)[: args.conversations]
    report = asyncio.run(run(conversations))
    table = figures(report)
    print("\n".join(record.as_markdown(table)))
    record.write("lexical-ablation", argv, [table], wall_s=time.perf_counter() - wall)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    return 0
