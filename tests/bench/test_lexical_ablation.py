"""bench/lexical_ablation.py's sparse formulation against the lexical leg it would replace.

On a two-scope corpus, qdrant-edge's sparse vectors (client-side BM25 term weights over each
scope's average length, IDF by Qdrant over the query's scopes) must score every fact of a
scope exactly as memory/facts.py's BM25 does, own field and neighbour field alike; IDF over the
whole shard must not (the other scope's documents change it). That is the ablation's
finding in miniature: the formulation is equal, only the statistics' population differs.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench import lexical_ablation  # noqa: E402
from vera.services.retrieval.domain import Citation, Fact, IndexQuery  # noqa: E402
from vera.services.retrieval.memory.facts import CONTEXT_WEIGHT, FactMemory  # noqa: E402

_SCOPES = {
    "proj-a": [
        "Ann said the kiln cracked during the pottery class",
        "Ann said the pottery class moved to Tuesday",
        "Bo said he bought a new kiln for the studio",
        "Bo said the charity run raised money for the shelter",
        "Ann said the studio is closed in August",
    ],
    "proj-b": [
        "Cy said the kiln is a kiln like any other kiln",
        "Di said the chess match ended in a draw",
        "Cy said the kiln vendor ships on Monday",
    ],
}
_QUERIES = ("kiln pottery", "charity shelter studio", "chess kiln Monday")


def _facts() -> list[Fact]:
    facts = []
    for scope, lines in _SCOPES.items():
        for turn, line in enumerate(lines, start=1):
            speaker, text = line.split(" said ", 1)
            facts.append(
                Fact(
                    fact_key=f"{scope}:{turn}",
                    version_id=f"{scope}:{turn}:v1",
                    scope_id=scope,
                    subject=speaker,
                    predicate="said",
                    object=text,
                    citations=(Citation(source_id=f"{scope}:s1", locator=f"D1:{turn}"),),
                )
            )
    return facts


def _scores(mode: str, tmp_path: Path) -> dict[str, dict[str, float]]:
    facts = _facts()
    memory = FactMemory(4)
    memory.upsert(facts, None, 1)
    fields = lexical_ablation.Fields(memory, {f.fact_key: f for f in facts})
    shard = lexical_ablation.new_shard(tmp_path / mode, mode)
    lexical_ablation.fill(shard, mode, facts, fields)
    leg = lexical_ablation.QdrantLexical(
        {"": shard}, None, lexical_ablation.query_terms, mode, CONTEXT_WEIGHT)
    out = {}
    for scope in _SCOPES:
        query = IndexQuery(scope_ids=(scope,), as_of=datetime.now(UTC))
        for text in _QUERIES:
            out[f"{scope}/{text}"] = {
                c.version_id: c.score for c in leg.search_sync(text, query, 50)
            }
    shard.close()
    return out


def _memory_scores() -> dict[str, dict[str, float]]:
    memory = FactMemory(4)
    memory.upsert(_facts(), None, 1)
    out = {}
    for scope in _SCOPES:
        query = IndexQuery(scope_ids=(scope,), as_of=datetime.now(UTC))
        for text in _QUERIES:
            out[f"{scope}/{text}"] = {
                c.version_id: c.score
                for c in memory.search(text, query, 50, context_weight=CONTEXT_WEIGHT)
            }
    return out


def test_sparse_idf_over_the_query_scopes_scores_as_the_memory_bm25(tmp_path: Path) -> None:
    expected = _memory_scores()
    got = _scores("sparse-tenant-scope-average", tmp_path)
    assert got.keys() == expected.keys()
    assert sum(1 for scores in expected.values() if scores) >= 5  # cases that match something
    for case, scores in expected.items():
        assert got[case].keys() == scores.keys(), case
        for version, score in scores.items():
            assert got[case][version] == pytest.approx(score, rel=1e-4), (case, version)


def test_idf_over_the_whole_shard_counts_the_other_scopes(tmp_path: Path) -> None:
    expected = _memory_scores()
    got = _scores("sparse", tmp_path)
    differing = [
        case
        for case, scores in expected.items()
        if any(got[case].get(v) != pytest.approx(s, rel=1e-4) for v, s in scores.items())
    ]
    assert differing  # "kiln" is common in proj-b, rarer across both scopes
