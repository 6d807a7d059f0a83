"""The code-repos evaluation set (bench/data/code_repos/) holds together: every question names
facts that exist, every fact cites a line range inside its file as recorded at the commit
with exactly those lines as evidence, the facts load as `vera ingest` records, and the
provenance names each repository's commit and a licence that allows shipping excerpts, with
its text shipped. No network, no model, no stack."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench import code_repos  # noqa: E402
from bench.metrics import score_question  # noqa: E402
from vera.ingest_records import parse_records  # noqa: E402

# Licences whose terms allow redistributing excerpts with the licence text.
REDISTRIBUTABLE = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause"}


@pytest.fixture(scope="module")
def codeset() -> code_repos.CodeSet:
    return code_repos.load()


def test_the_set_has_its_size(codeset: code_repos.CodeSet) -> None:
    assert 60 <= len(codeset.facts) <= 120
    assert 40 <= len(codeset.questions) <= 80
    assert 2 <= len(codeset.repositories) <= 3


def test_every_question_names_facts_that_exist(codeset: code_repos.CodeSet) -> None:
    ids = Counter(fact.id for fact in codeset.facts)
    assert [i for i, n in ids.items() if n > 1] == []
    assert len({q.id for q in codeset.questions}) == len(codeset.questions)
    for question in codeset.questions:
        assert question.question.strip() and question.facts, question.id
        assert set(question.facts) <= set(ids), question.id


def test_every_fact_cites_lines_inside_its_file(codeset: code_repos.CodeSet) -> None:
    for fact in codeset.facts:
        repository = codeset.repositories[fact.repository]
        length = repository.files[fact.path]
        assert 1 <= fact.start <= fact.end <= length, fact.id
        assert len(fact.evidence.split("\n")) == fact.end - fact.start + 1, fact.id
        assert fact.subject and fact.predicate and fact.object, fact.id


def test_each_fact_is_told_apart_by_its_citation(codeset: code_repos.CodeSet) -> None:
    """The bench scores a result by the (file, line range) it cites."""
    assert len(codeset.fact_by_citation()) == len(codeset.facts)


def test_the_facts_load_as_ingest_records(codeset: code_repos.CodeSet) -> None:
    lines = code_repos.to_jsonl_records(codeset)
    parsed = parse_records(enumerate(lines, start=1))
    assert len(parsed.facts) == len(codeset.facts)
    assert len(parsed.sources) == len({(f.repository, f.path) for f in codeset.facts})
    assert parsed.cited_sources == {}
    assert {fact.locator for fact in parsed.facts} == {
        locator for _, locator in codeset.fact_by_citation()}


def test_provenance_names_each_repository_and_a_redistributable_licence(
        codeset: code_repos.CodeSet) -> None:
    provenance = (code_repos.DATA / "PROVENANCE.md").read_text()
    for repository in codeset.repositories.values():
        assert repository.license in REDISTRIBUTABLE, repository.key
        row = next((line for line in provenance.splitlines() if repository.url in line), "")
        assert repository.commit in row and repository.license in row, repository.key
        text = code_repos.DATA / "licenses" / f"{repository.key}-LICENSE.txt"
        assert text.is_file() and text.stat().st_size > 0, repository.key


def test_a_result_scores_by_the_facts_its_citations_name(codeset: code_repos.CodeSet
                                                         ) -> None:
    first, second = codeset.facts[0], codeset.facts[1]
    by_citation = codeset.fact_by_citation()

    def cited(fact: code_repos.CodeFact) -> dict:
        source, locator = fact.citation
        return {"source_id": source, "locator": locator}

    payload = {"results": [
        {"rank": 2, "citations": [cited(first)]},
        {"rank": 1, "citations": [cited(second), {"source_id": "elsewhere", "locator": "L1"}]},
    ]}
    ranking = code_repos.ranking_from(payload, by_citation)
    assert ranking == [[second.id], [first.id]]
    score = score_question(ranking, (first.id,))
    assert score["hit@5"] == 1.0 and score["mrr@10"] == 0.5
