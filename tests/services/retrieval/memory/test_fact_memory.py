"""The in-process index: BM25 over a fact's own text and its source neighbours, exact
dense and neighbourhood cosines, entity mentions, supersession and filters."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from vera.services.retrieval.domain import Citation, Fact, FactState, IndexQuery
from vera.services.retrieval.memory import columns, text
from vera.services.retrieval.memory.columns import best_slots
from vera.services.retrieval.memory.facts import FactMemory, order_key
from vera.services.retrieval.memory.snapshot_file import MemorySnapshot, SnapshotKey

T = datetime(2025, 1, 1, tzinfo=UTC)


def turn(n: int, subject: str, obj: str, source: str = "s1", **extra) -> Fact:
    return Fact(
        f"k{n}", f"k{n}-v1", "a", subject, "said", obj, recorded_at=T,
        citations=(Citation(source_id=source, locator=f"D1:{n}"),), **extra,
    )


def q(**kwargs) -> IndexQuery:
    return IndexQuery(**{"scope_ids": ("a",), "as_of": T + timedelta(days=1), **kwargs})


@pytest.fixture
def memory() -> FactMemory:
    m = FactMemory(2)
    facts = [
        turn(1, "Ann", "I adopted a dog last week"),
        turn(2, "Bob", "What breed is it?"),
        turn(3, "Ann", "A golden retriever named Max"),
        turn(10, "Bob", "Unrelated chat about the weather", source="s2"),
    ]
    # Delivered out of order: neighbours follow the locator order within a source.
    m.upsert([facts[2], facts[0]], [[1.0, 0.0], [0.0, 1.0]], 1)
    m.upsert([facts[1], facts[3]], [[0.6, 0.8], [1.0, 0.0]], 2)
    return m


def test_terms_and_names():
    assert text.terms("Caroline's dogs were running") == ["carolin", "dog", "run"]
    assert text.name_key("Payments-API") == "payments api"
    assert "payments api" in text.mentioned_names("who owns the payments-api service?")
    assert order_key("D1:9") < order_key("D1:10")


def test_an_entity_named_by_the_question_covers_the_subjects_about_its_parts():
    mentioned = text.mentioned_names("Do warnings fail the itsdangerous test suite?")
    subjects = {"itsdangerous": 3, "itsdangerous pytest configuration": 1, "markupsafe": 2}
    assert text.entity_mentioned("itsdangerous", mentioned, subjects)
    assert text.entity_mentioned("itsdangerous pytest configuration", mentioned, subjects)
    assert not text.entity_mentioned("markupsafe", mentioned, subjects)
    # A prefix counts only when it is itself some fact's subject (an entity), not any word.
    assert not text.entity_mentioned("test runner", mentioned, {"test runner": 1})
    assert not text.entity_mentioned("fail safe", mentioned, {"fail safe": 1})
    assert not text.entity_mentioned("", mentioned, subjects)


def test_neighbour_field_finds_the_answer_next_to_the_question(memory: FactMemory):
    own_only = memory.search("which dog breed", q(), 10, context_weight=0.0)
    with_context = memory.search("which dog breed", q(), 10, context_weight=0.7)
    assert {c.fact_key for c in own_only} == {"k1", "k2"}
    # k3 names neither word but sits between the question and the dog.
    assert "k3" in {c.fact_key for c in with_context}
    assert "k10" not in {c.fact_key for c in with_context}  # another source


def test_features_dense_context_and_entities(memory: FactMemory):
    features = memory.features(("a",), ["k3-v1", "k10-v1"], [1.0, 0.0], "what did Ann adopt")
    assert features["k3-v1"].dense == pytest.approx(1.0, abs=1e-3)
    assert features["k3-v1"].subject_mentioned
    assert not features["k10-v1"].subject_mentioned
    assert features["k10-v1"].dense_context == 0.0  # alone in its source
    assert 0.0 < features["k3-v1"].dense_context <= 1.0


def test_supersession_and_filters(memory: FactMemory):
    newer = Fact("k3", "k3-v2", "a", "Ann", "said", "A golden retriever named Rex",
                 recorded_at=T + timedelta(hours=1),
                 citations=(Citation(source_id="s1", locator="D1:3"),))
    memory.upsert([newer], [[1.0, 0.0]], 3)
    hits = memory.search("golden retriever", q(), 10, context_weight=0.0)
    assert [h.version_id for h in hits] == ["k3-v2"]
    past = memory.search("golden retriever", q(known_as_of=T + timedelta(minutes=1)), 10,
                         context_weight=0.0)
    assert [h.version_id for h in past] == ["k3-v1"]
    assert memory.search("golden", q(document_type="adr"), 10, context_weight=0.0) == []
    assert memory.search("golden", q(scope_ids=("b",)), 10, context_weight=0.0) == []


def test_snapshot_scores_ignore_later_writes(memory: FactMemory):
    """With known_as_of, every corpus statistic counts only the versions visible then, so
    later writes (in the same source, another source, or another scope) change no score."""
    later = T + timedelta(hours=6)
    snapshot = q(known_as_of=T + timedelta(hours=1))

    def scores():
        found = memory.search("which dog breed is Max", snapshot, 10, context_weight=0.7)
        keys = [c.version_id for c in found]
        feats = memory.features(("a",), keys, [0.6, 0.8], "which dog breed is Max", snapshot)
        return [(c.fact_key, c.score) for c in found], feats

    before = scores()
    assert before[0]
    memory.upsert(
        [
            Fact("k4", "k4-v1", "a", "Ann", "said", "The dog breed Max loves fetch",
                 recorded_at=later, citations=(Citation(source_id="s1", locator="D1:4"),)),
            Fact("k11", "k11-v1", "a", "Cy", "said", "dog dog breed breed weather",
                 recorded_at=later, citations=(Citation(source_id="s2", locator="D1:11"),)),
            Fact("k1", "k1-v2", "a", "Ann", "said", "I adopted a cat, not a dog",
                 recorded_at=later, citations=(Citation(source_id="s1", locator="D1:1"),)),
            Fact("b1", "b1-v1", "b", "Dee", "said", "dog breed", recorded_at=later,
                 citations=(Citation(source_id="s9", locator="D1:1"),)),
        ],
        [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [1.0, 0.0]],
        3,
    )
    assert scores() == before
    # The live view does see the later writes.
    live = memory.search("which dog breed is Max", q(), 10, context_weight=0.7)
    assert "k4" in {c.fact_key for c in live}


def test_a_current_read_sees_valid_time_boundaries_and_writes_after_the_last_read():
    """Consecutive current reads share one state/time filter until a write or until
    ``as_of`` passes a fact's valid_from or valid_to."""
    m = FactMemory(2)
    starts, ends = T + timedelta(days=2), T + timedelta(days=5)
    m.upsert(
        [
            Fact("k1", "k1-v1", "a", "Ann", "said", "the kiln cracked", recorded_at=T),
            Fact("k2", "k2-v1", "a", "Bob", "said", "a new kiln arrives", recorded_at=T,
                 valid_from=starts, valid_to=ends),
        ],
        [[1.0, 0.0], [0.0, 1.0]],
        1,
    )

    def found(as_of: datetime) -> set[str]:
        query = IndexQuery(scope_ids=("a",), as_of=as_of)
        return {c.fact_key for c in m.search("kiln", query, 10, context_weight=0.7)}

    assert found(T + timedelta(days=1)) == {"k1"}
    assert found(T + timedelta(days=1, hours=1)) == {"k1"}
    assert found(starts) == {"k1", "k2"}  # valid_from is inclusive
    assert found(ends - timedelta(seconds=1)) == {"k1", "k2"}
    assert found(ends) == {"k1"}  # valid_to is exclusive
    assert found(T + timedelta(days=3)) == {"k1", "k2"}  # back inside the window
    m.upsert([Fact("k1", "k1-v1", "a", "Ann", "said", "the kiln cracked", recorded_at=T,
                   state=FactState.RETRACTED)], None, 2)
    assert found(T + timedelta(days=3)) == {"k2"}


def test_a_source_delivered_in_any_order_has_the_neighbours_of_its_locator_order():
    """Each insert relinks only the facts near it; the result must be the neighbours (and
    context lengths) of the whole source laid out in locator order."""
    from vera.services.retrieval.memory.facts import CONTEXT_WINDOW

    rng = random.Random(5)
    facts = [turn(n, "Ann", " ".join(["word"] * (1 + n % 4))) for n in range(1, 121)]
    rng.shuffle(facts)
    m = FactMemory(2)
    for position, start in enumerate(range(0, len(facts), 7), start=1):
        m.upsert(facts[start : start + 7], None, position)
    scope = m._scopes["a"]
    in_order = sorted(range(scope.n), key=lambda s: order_key(f"D1:{scope.fact_keys[s][1:]}"))
    for index, slot in enumerate(in_order):
        near = in_order[max(0, index - CONTEXT_WINDOW) : index + CONTEXT_WINDOW + 1]
        expected = [s for s in near if s != slot]
        assert [s for s in scope.nb[slot] if s >= 0] == expected
        assert scope.ctx_length[slot] == sum(scope.length[s] for s in expected)
    assert scope.total_ctx_length == sum(scope.ctx_length[: scope.n])


def test_summing_by_slot_is_the_same_whether_it_sorts_or_counts():
    import numpy as np

    from vera.services.retrieval.memory.columns import sum_by_slot

    rng = np.random.default_rng(7)
    slots = rng.integers(0, 100, size=40)
    weights = rng.integers(1, 4, size=40).astype(float)
    expected = np.bincount(slots, weights=weights)
    present = np.flatnonzero(expected)
    for n in (1000, 100):  # 40 slots among 1000 sort; among 100 they are counted
        distinct, summed = sum_by_slot(slots, weights, n)
        assert distinct.tolist() == present.tolist()
        assert summed.tolist() == expected[present].tolist()


def test_terms_are_the_same_when_threads_stem_at_once() -> None:
    # Snowball stemmers keep working state on themselves; shared between threads they
    # raised IndexError and returned wrong stems (two replicas' lexical threads in one
    # process did). A thread switch every microsecond makes the race certain.
    line = "running happily connections organizational generously relational " * 40
    expected = text.terms(line)
    wrong: list[str] = []

    def stem() -> None:
        for _ in range(100):
            try:
                if text.terms(line) != expected:
                    wrong.append("different terms")
            except Exception as exc:
                wrong.append(type(exc).__name__)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=stem) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []


# --- recorded outputs -------------------------------------------------------------------
# Every candidate, score and feature of a generated two-scope corpus (common and rare terms,
# repeats, sources delivered out of order, supersession, retractions, snapshots, filters),
# recorded bit for bit (floats as hex): a change to the memory's layout or arithmetic that
# moves any of them fails here. After a deliberate scoring change, regenerate with
#     VERA_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q \
#         tests/services/retrieval/memory/test_fact_memory.py
GOLDEN = Path(__file__).with_name("memory_golden.json")
_WORDS = [f"w{i}" for i in range(400)]
_NAMES = ["Ann", "Bob", "Payments API", "ledger-service", "Team Cobalt", "Cy", "Dee"]


def _recorded_corpus() -> tuple[list[Fact], list[list[float]]]:
    rng = random.Random(11)
    weights = [1.0 / (i + 1) for i in range(len(_WORDS))]  # Zipf: a few terms are common
    facts: list[Fact] = []
    for scope, count in (("big", 1500), ("small", 150)):
        made = 0
        while made < count:
            source = f"{scope}-src-{made}"
            size = min(rng.randint(1, 12), count - made)
            for index in rng.sample(range(size), size):  # out of order within the source
                words = rng.choices(_WORDS, weights, k=rng.randint(2, 14))
                n = made + index
                facts.append(Fact(
                    f"{scope}-k{n}", f"{scope}-k{n}-v1", scope, rng.choice(_NAMES),
                    rng.choice(["said", "calls", "is_owned_by", "pins"]), " ".join(words),
                    state=rng.choice([FactState.ACTIVE] * 6 + [FactState.PROPOSED]),
                    trust_tier=rng.randint(1, 3), authority=round(rng.uniform(0.2, 1.0), 2),
                    valid_from=T - timedelta(days=rng.randint(0, 400)) if rng.random() < 0.7
                    else None,
                    valid_to=T + timedelta(days=rng.randint(-30, 30)) if rng.random() < 0.1
                    else None,
                    recorded_at=T - timedelta(days=rng.randint(1, 60)),
                    document_type=rng.choice(["adr", "runbook", "conversation"]),
                    source_type=rng.choice(["doc", "chat"]),
                    citations=(Citation(source_id=source, locator=f"D{index // 5}:{index}"),)
                    if rng.random() < 0.9 else (),
                ))
            made += size
    for fact in rng.sample(facts, 200):  # newer versions supersede, some facts retracted
        later = fact.recorded_at + timedelta(days=rng.randint(1, 90))
        facts.append(Fact(
            fact.fact_key, fact.version_id[:-1] + "2", fact.scope_id, fact.subject,
            fact.predicate, fact.object + " " + rng.choice(_WORDS[:20]), recorded_at=later,
            document_type=fact.document_type, citations=fact.citations,
            state=rng.choice([FactState.ACTIVE, FactState.RETRACTED]),
        ))
    vectors = [[rng.gauss(0.0, 1.0) for _ in range(4)] for _ in facts]
    return facts, vectors


def _recorded_outputs(
    memory: FactMemory, *, restart: Callable[[FactMemory], FactMemory] | None = None
) -> dict[str, list]:
    """``restart``: what becomes of the memory halfway through the writes."""
    facts, vectors = _recorded_corpus()
    pages = list(enumerate(range(0, len(facts), 64), start=1))
    for position, start in pages:
        memory.upsert(facts[start : start + 64], vectors[start : start + 64], position)
        if restart is not None and position == len(pages) // 2:
            memory = restart(memory)
    rng = random.Random(12)
    weights = [1.0 / (i + 1) for i in range(len(_WORDS))]
    texts = [" ".join(rng.choices(_WORDS, weights, k=rng.randint(1, 6))) for _ in range(30)]
    texts += ["what did Ann say about w3 and w7", "payments api w0 w1 w2"]
    variants = {
        "now": {},
        "snapshot": {"known_as_of": T - timedelta(days=20)},
        "past": {"as_of": T - timedelta(days=200)},
        "filters": {"document_type": "adr", "min_authority": 0.5, "max_trust_tier": 2},
        "predicates": {"include_predicates": ("said", "calls"),
                       "exclude_predicates": ("calls",), "source_type": "chat"},
    }
    out: dict[str, list] = {}
    vector = [0.5, -0.25, 1.0, 0.125]
    for i, query_text in enumerate(texts):
        for name, variant in variants.items():
            query = IndexQuery(**{"scope_ids": ("big", "small"), "as_of": T, **variant})
            for weight in (0.7, 0.0):
                found = memory.search(query_text, query, 10, context_weight=weight)
                out[f"{i} {name} {weight}"] = [[c.version_id, c.score.hex()] for c in found]
            features = memory.features(
                ("big", "small"), [c.version_id for c in found] + ["big-k7-v1", "small-k3-v2"],
                vector, query_text, query,
            )
            out[f"{i} {name} features"] = [
                [v, f.dense.hex(), f.dense_context.hex(), f.subject_mentioned]
                for v, f in sorted(features.items())
            ]
    return out


def test_candidates_scores_and_features_are_the_recorded_ones() -> None:
    outputs = _recorded_outputs(FactMemory(4))
    assert sum(len(v) for v in outputs.values()) > 1500  # the corpus answers most queries
    if os.environ.get("VERA_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(outputs, indent=0, sort_keys=True) + "\n")
    assert outputs == json.loads(GOLDEN.read_text())


def test_a_memory_restored_from_its_snapshot_goes_on_as_if_it_never_stopped(
    tmp_path: Path,
) -> None:
    """Written halfway through the writes, read back, then written on: the recorded
    candidates, scores and features, bit for bit (the columns come back at their filled
    size and grow again on the next insert)."""
    snapshot = MemorySnapshot(tmp_path / "facts.snapshot", "e1")
    key = SnapshotKey("epoch-1", "e1", 4)

    def restart(memory: FactMemory) -> FactMemory:
        snapshot.write(memory, key, 7)
        restored = snapshot.read(key, cursor=7)
        assert restored is not None
        again, position = restored
        assert again is not memory and position == 7
        return again

    assert _recorded_outputs(FactMemory(4), restart=restart) == json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("per_fact", [columns.TERM_WEIGHTS_BYTES_PER_FACT, 8])
def test_kept_term_weights_score_as_weights_made_afresh(
    monkeypatch: pytest.MonkeyPatch, per_fact: int
) -> None:
    """A current read reuses a term's weights until the scope's next write: the same
    candidates and scores, bit for bit, as a memory that makes every weight afresh, with
    writes between the reads and under a budget that keeps dropping kept weights."""
    monkeypatch.setattr(columns, "TERM_WEIGHTS_BYTES_PER_FACT", per_fact)
    facts, vectors = _recorded_corpus()
    rng = random.Random(13)
    weights = [1.0 / (i + 1) for i in range(len(_WORDS))]
    texts = [" ".join(rng.choices(_WORDS, weights, k=rng.randint(1, 6))) for _ in range(12)]
    query = IndexQuery(scope_ids=("big", "small"), as_of=T)
    keeping, afresh = FactMemory(4), FactMemory(4)

    def read(memory: FactMemory, query_text: str) -> list[tuple[str, str]]:
        found = memory.search(query_text, query, 10, context_weight=0.7)
        return [(c.version_id, c.score.hex()) for c in found]

    kept = 0
    for position, start in enumerate(range(0, len(facts), 300), start=1):
        for memory in (keeping, afresh):
            memory.upsert(facts[start : start + 300], vectors[start : start + 300], position)
        for query_text in texts * 3:  # met once, then kept, then reused
            for scope in afresh._scopes.values():
                scope._weights = None
            assert read(keeping, query_text) == read(afresh, query_text)
        big = keeping._scopes["big"]._weights
        assert big is not None and big._bytes <= per_fact * keeping._scopes["big"].n
        kept += len(big._entries)
    assert kept > 0


def test_the_cut_keeps_the_best_and_takes_ties_in_slot_order() -> None:
    score = np.array([0.0, 3.0, 1.0, 2.0, 1.0, 1.0, 5.0, 1.0])
    slots = np.flatnonzero(score > 0)
    assert best_slots(score, slots, 4).tolist() == [1, 3, 6, 2]
    assert best_slots(score, slots, 5).tolist() == [1, 3, 6, 2, 4]
    assert best_slots(score, slots, 3).tolist() == [1, 6, 3]
