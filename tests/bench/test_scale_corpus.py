"""The generated corpus of the scale bench (bench/scale_corpus.py): deterministic, exact sizes, and
every file accepted whole by `vera ingest`'s validator. Fast: no stack, no model."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench import scale_corpus
from vera.ingest_records import parse_jsonl


def test_same_seed_same_corpus_other_seed_other_corpus() -> None:
    a, b = scale_corpus.generate(3000, seed=7), scale_corpus.generate(3000, seed=7)
    assert a.files == b.files
    assert a.questions == b.questions
    assert scale_corpus.generate(3000, seed=8).files != a.files


@pytest.mark.parametrize(("n", "per_file", "files"), [(1, 10, 1), (2500, 1000, 3),
                                                       (10_000, 10_000, 1)])
def test_exact_sizes_and_file_split(n: int, per_file: int, files: int) -> None:
    corpus = scale_corpus.generate(n, facts_per_file=per_file, questions=50)
    assert corpus.facts == n
    assert len(corpus.files) == files
    for records in corpus.files:
        assert sum(r["type"] == "fact" for r in records) <= per_file
    assert len(corpus.questions) == min(50, n)


def test_files_pass_vera_ingest_validation(tmp_path: Path) -> None:
    corpus = scale_corpus.generate(2500, facts_per_file=1000)
    paths = scale_corpus.write_files(corpus, tmp_path)
    parsed = [parse_jsonl(p) for p in paths]  # raises IngestFileError on any bad line
    assert sum(len(p.facts) for p in parsed) == 2500
    assert all(p.sources for p in parsed)
    assert any(p.repositories for p in parsed)  # code-path facts map their repository
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            assert json.loads(line)["type"] in ("source", "fact")


def test_sources_have_neighbours_and_facts_are_varied() -> None:
    corpus = scale_corpus.generate(5000)
    facts = [r for records in corpus.files for r in records if r["type"] == "fact"]
    per_source = Counter(f["source"] for f in facts)
    assert min(per_source.values()) >= 2 or len(per_source) == 1
    assert sum(per_source.values()) / len(per_source) >= 4
    assert len({f["predicate"] for f in facts}) >= 10
    assert len({(f["subject"], f["predicate"], f["object"]) for f in facts}) == len(facts)
    assert len({f["document_type"] for f in facts}) >= 5
    assert any(f.get("code_path") for f in facts)


def test_questions_point_at_held_facts() -> None:
    corpus = scale_corpus.generate(4000, questions=100)
    held = {(r["source"], r["locator"]) for records in corpus.files for r in records
            if r["type"] == "fact"}
    assert len(corpus.questions) == 100
    for q in corpus.questions:
        assert (q.source_id, q.locator) in held
        assert q.text.endswith("?")


def test_the_memory_table_gives_each_process_its_peak_and_its_share_per_fact() -> None:
    from bench.scale import format_memory

    table = format_memory(
        [
            {"facts": 10_000, "peak_rss_mib": {"retrieval": 800.0, "knowledge": 150.0}},
            {"facts": 100_000, "peak_rss_mib": {"retrieval": 1600.0}},
        ]
    )
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if "|" in line}
    assert "800 / 81.92" in rows["retrieval"] and "1600 / 16.38" in rows["retrieval"]
    assert "150 / 15.36" in rows["knowledge"] and rows["knowledge"].rstrip("| ").endswith("-")
