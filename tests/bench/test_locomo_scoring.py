"""The LoCoMo bench's scoring: evidence normalization, turn -> fact, metrics, BM25.

Fast and model-free: the dense baseline and the stack are not touched here.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench import locomo  # noqa: E402
from bench.bm25 import BM25, tokenize  # noqa: E402
from bench.metrics import (  # noqa: E402
    Tally,
    hit_at,
    percentile,
    recall_at,
    reciprocal_rank,
    score_question,
)
from vera.services.retrieval.memory.text import STOPWORDS  # noqa: E402

KNOWN = frozenset({"D1:1", "D1:2", "D4:4", "D4:6", "D9:1", "D9:17", "D8:6", "D30:5"})


# --- evidence normalization --------------------------------------------------------------


def test_several_ids_in_one_string_are_split_on_spaces_commas_and_semicolons():
    kept, dropped = locomo.normalize_evidence(["D9:1 D4:4 D4:6", "D8:6; D9:17", "D1:1,D1:2"],
                                              KNOWN)
    assert kept == ("D9:1", "D4:4", "D4:6", "D8:6", "D9:17", "D1:1", "D1:2")
    assert dropped == ()


def test_leading_zeros_are_dropped():
    assert locomo.normalize_dia_id("D30:05") == "D30:5"
    assert locomo.normalize_dia_id("D030:5") == "D30:5"
    kept, _ = locomo.normalize_evidence(["D30:05"], KNOWN)
    assert kept == ("D30:5",)


def test_ids_that_name_no_turn_are_ignored():
    kept, dropped = locomo.normalize_evidence(["D1:1", "D", "D:11:26", "D10:19", ""], KNOWN)
    assert kept == ("D1:1",)
    assert dropped == ("D", "D:11:26", "D10:19")


def test_repeated_ids_count_once():
    kept, _ = locomo.normalize_evidence(["D1:1", "D1:01", "D1:1 D1:2"], KNOWN)
    assert kept == ("D1:1", "D1:2")


# --- turn -> fact ------------------------------------------------------------------------


SAMPLE = {
    "sample_id": "conv-99",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I started pottery classes."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice! I ran a charity race.",
             "blip_caption": "a photo of runners"},
        ],
        "session_2_date_time": "12:48 am on 1 February, 2024",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:01", "text": "My kiln arrived."}],
        "session_3_date_time": "9:00 am on 2 March, 2024",  # a date with no session
    },
    "qa": [
        {"question": "What class did Ann take?", "answer": "pottery", "evidence": ["D1:1"],
         "category": 4},
        {"question": "When did Ann's kiln arrive?", "evidence": ["D2:1; D1:1"], "category": 2},
        {"question": "Adversarial?", "adversarial_answer": "x", "evidence": ["D1:2"],
         "category": 5},
        {"question": "No evidence?", "answer": "y", "evidence": [], "category": 3},
        {"question": "Only a broken id?", "answer": "z", "evidence": ["D"], "category": 1},
    ],
}


def test_session_dates_are_parsed():
    assert locomo.parse_session_date("1:56 pm on 8 May, 2023") == datetime(
        2023, 5, 8, 13, 56, tzinfo=UTC)
    assert locomo.parse_session_date("12:48 am on 1 February, 2024") == datetime(
        2024, 2, 1, 0, 48, tzinfo=UTC)
    assert locomo.parse_session_date("10:04 am on 19 January,  2023").day == 19


def test_turns_become_facts_with_the_session_as_source_and_the_dia_id_as_locator():
    conv = locomo.convert_sample(SAMPLE)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    records = locomo.to_jsonl_records(conv)
    sources = [r for r in records if r["type"] == "source"]
    facts = [r for r in records if r["type"] == "fact"]
    assert [s["id"] for s in sources] == ["conv-99-session_1", "conv-99-session_2"]
    assert sources[0]["observed_at"] == "2023-05-08T13:56:00Z"
    assert facts[0] == {
        "type": "fact", "subject": "Ann", "predicate": "said",
        "object": "I started pottery classes.", "source": "conv-99-session_1",
        "locator": "D1:1", "valid_from": "2023-05-08T13:56:00Z",
        "document_type": "conversation",
    }
    assert facts[2]["locator"] == "D2:1"
    assert facts[2]["valid_from"] == "2024-02-01T00:48:00Z"
    assert facts[2]["source"] == "conv-99-session_2"
    assert conv.project == "locomo-conv-99"
    assert conv.turns[0].fact_text == "Ann said I started pottery classes."


def test_jsonl_is_accepted_by_vera_ingest(tmp_path: Path):
    from vera.ingest_records import parse_jsonl

    path = locomo.write_jsonl(locomo.convert_sample(SAMPLE), tmp_path / "conv.jsonl")
    assert all(json.loads(line) for line in path.read_text().splitlines())
    parsed = parse_jsonl(path)
    assert len(parsed.facts) == 3 and len(parsed.sources) == 2
    assert parsed.facts[0].locator == "D1:1"


def test_adversarial_and_evidence_less_questions_are_left_out():
    conv = locomo.convert_sample(SAMPLE)
    assert [(q.index, q.category, q.evidence) for q in conv.questions] == [
        (0, 4, ("D1:1",)), (1, 2, ("D2:1", "D1:1"))]
    assert conv.skipped_adversarial == 1
    assert conv.skipped_no_evidence == 2
    assert conv.dropped_evidence == ("D",)


# --- metrics -----------------------------------------------------------------------------


def test_metrics_on_a_hand_made_ranking():
    ranking = [["X1"], ["X2"], ["E1"], ["X3"], ["X4"], ["X5"], ["E2"], ["X6"]]
    evidence = ["E1", "E2", "E3"]
    assert hit_at(ranking, evidence, 2) == 0.0
    assert hit_at(ranking, evidence, 5) == 1.0
    assert recall_at(ranking, evidence, 5) == pytest.approx(1 / 3)
    assert recall_at(ranking, evidence, 10) == pytest.approx(2 / 3)
    assert reciprocal_rank(ranking, evidence) == pytest.approx(1 / 3)
    assert score_question([], evidence) == {
        "hit@5": 0.0, "hit@10": 0.0, "recall@5": 0.0, "recall@10": 0.0, "mrr@10": 0.0}


def test_a_result_hits_through_any_of_its_citations_and_rank_11_does_not_count():
    ranking = [["X1", "E2"], *([["X"]] * 9), ["E1"]]
    assert reciprocal_rank(ranking, ["E1", "E2"]) == 1.0
    assert recall_at(ranking, ["E1", "E2"], 10) == 0.5
    late = [*([["X"]] * 10), ["E1"]]
    assert hit_at(late, ["E1"], 10) == 0.0 and reciprocal_rank(late, ["E1"]) == 0.0


def test_percentiles_interpolate_like_numpy():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 95) == pytest.approx(95.05)
    assert percentile([7.0], 95) == 7.0
    assert math.isnan(percentile([], 50))


def test_tally_aggregates_overall_and_per_category():
    tally = Tally()
    tally.add([["E"]], ["E"], "2 temporal", 10.0)
    tally.add([["X"], ["E"]], ["E"], "4 single-hop", 30.0)
    tally.add([["X"]], ["E"], "4 single-hop", 20.0)
    summary = tally.summary()
    assert summary["questions"] == 3
    assert summary["hit@5"] == pytest.approx(2 / 3)
    assert summary["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert summary["p50_ms"] == 20.0
    by_category = tally.by_category()
    assert by_category["2 temporal"]["mrr@10"] == 1.0
    assert by_category["4 single-hop"]["questions"] == 2
    assert by_category["4 single-hop"]["hit@10"] == 0.5


# --- BM25 --------------------------------------------------------------------------------


def test_tokenize_lowercases_drops_stopwords_and_stems():
    assert tokenize("The Horses were RUNNING in Caroline's paintings!") == [
        "hors", "run", "carolin", "paint"]
    assert "the" in STOPWORDS and "would" in STOPWORDS and len(STOPWORDS) > 150
    assert tokenize("what did she do with them?") == []


def test_bm25_matches_a_stemmed_query_term_and_ignores_stopwords():
    docs = [
        "Ann said I went hiking with my dog last weekend",
        "Bo said the weather was nice and the sky was blue",
        "Ann said painting relaxes me after work",
        "Bo said I adopted two cats",
    ]
    index = BM25(docs)
    top = index.search("What did Ann paint?", limit=2)
    assert top[0][0] == 2  # "paint" matches "painting" through the stemmer
    assert [i for i, _ in index.search("adoptions", limit=4)] == [3]
    assert index.search("what was the and", limit=4) == []  # only stopwords
    assert index.search("zebra", limit=4) == []


def test_bm25_prefers_rarer_terms_and_shorter_documents():
    docs = ["cat dog", "cat", "cat cat fish bird tree house", "dog"]
    index = BM25(docs)
    assert index.search("cat", limit=1)[0][0] == 1  # same tf, shortest document
    scores = index.scores("cat fish")
    assert max(scores, key=scores.get) == 2  # the only document with the rare term
    assert len(index) == 4
