"""The retrieval pipeline against fakes of its ports: fusion, filters, boosts, conflicts,
limits, token budget, omissions and empty reasons."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from retrieval_fakes import CONTRACT, NOW, OTHER, SCOPE, fact, harness, keys

from vera.errors import InvalidInput
from vera.services.retrieval.domain import (
    Candidate,
    Citation,
    ConflictHandling,
    Fact,
    FactState,
    Filters,
)
from vera.services.retrieval.pipeline import retriever as pipeline
from vera.services.retrieval.pipeline.retriever import (
    Fusion,
    binding_boost,
    estimate_tokens,
    fuse,
)


def test_fuse_normalizes_each_leg_and_weights_them():
    fused = fuse(
        [Candidate("a", "a1", 0.9), Candidate("b", "b1", 0.5), Candidate("a", "a0", 0.7)],
        [Candidate("b", "b1", 4.0), Candidate("c", "c1", 2.0)],
    )
    assert fused["a"] == pytest.approx((0.9, 0.0, pipeline.DENSE_WEIGHT * 0.9))
    assert fused["b"] == pytest.approx(
        (0.5, 1.0, pipeline.DENSE_WEIGHT * 0.5 + pipeline.LEXICAL_WEIGHT * 1.0)
    )
    assert fused["c"] == pytest.approx((0.0, 0.5, pipeline.LEXICAL_WEIGHT * 0.5))


@pytest.mark.parametrize("scale", [pipeline.SCALE_MINMAX, pipeline.SCALE_ZSCORE])
def test_a_fusion_scale_puts_each_leg_over_its_candidates(scale):
    dense = [Candidate("a", "a1", 0.9), Candidate("b", "b1", 0.5), Candidate("c", "c1", 0.3)]
    lexical = [Candidate("b", "b1", 4.0), Candidate("c", "c1", 2.0)]
    fusion = Fusion(scale=scale, dense_weight=0.6, lexical_weight=0.4)
    fused = fuse(dense, lexical, fusion=fusion)
    # The legs' own scores are reported as they are; only the fused score is rescaled.
    assert fused["b"][:2] == pytest.approx((0.5, 1.0))
    if scale == pipeline.SCALE_MINMAX:
        assert fused["a"][2] == pytest.approx(0.6 * 1.0 + 0.4 * 0.0)
        assert fused["b"][2] == pytest.approx(0.6 * (0.2 / 0.6) + 0.4 * 1.0)
        assert fused["c"][2] == pytest.approx(0.6 * 0.0 + 0.4 * 0.5)
    else:
        assert sum(v[2] for v in fused.values()) == pytest.approx(0.0, abs=1e-9)
        assert fused["b"][2] > fused["a"][2] > fused["c"][2]


def test_an_unknown_fusion_scale_is_refused():
    with pytest.raises(ValueError, match="scale"):
        Fusion(scale="rrf")


@pytest.mark.parametrize(
    ("query", "first"),
    [("when did the team move to Argo CD?", "dated"), ("how does the team deploy?", "plain")],
)
async def test_the_time_bonus_lifts_a_fact_that_says_when_for_a_when_question(query, first):
    facts = [fact("plain", object="deploys with Argo CD"),
             fact("dated", object="moved to Argo CD last week")]
    h = harness(facts, dense={"plain": 0.6, "dated": 0.55},
                fusion=Fusion(time_bonus=0.1))
    outcome = await h.retriever.search([SCOPE], query, 10, Filters())
    assert keys(outcome)[0] == first
    # The learned stage reads the same term (rank/learned.py FEATURES).
    timed = {r.fact.fact_key: r.signals["time"] for r in outcome.results}
    assert timed == ({"dated": 1.0, "plain": 0.0} if first == "dated"
                     else {"dated": 0.0, "plain": 0.0})


def test_fuse_drops_dense_only_noise_below_the_floor():
    fused = fuse([Candidate("noise", "n1", pipeline.MIN_DENSE_SIMILARITY / 2)], [])
    assert fused == {}


async def test_search_ranks_by_fused_score_with_signals_and_refs():
    h = harness(
        [fact("a"), fact("b"), fact("c")],
        dense={"a": 0.9, "b": 0.5, "c": 0.3},
        lexical={"b": 3.0},
    )
    outcome = await h.retriever.search([SCOPE], "question", 10, Filters())
    assert keys(outcome) == ["b", "a", "c"]
    top = outcome.results[0]
    assert top.position == 1 and top.result_ref == "b-v1"
    assert set(top.signals) == {
        "dense",
        "lexical",
        "fused",
        "boost",
        "trust_tier",
        "authority",
        "final",
        "dense_context",
        "entity",
        "time",
        "stale",
        "hand_rank",
    }
    assert top.score == pytest.approx(top.signals["final"])
    assert [r.signals["hand_rank"] for r in outcome.results] == [1.0, 2.0, 3.0]
    assert [r.position for r in outcome.results] == [1, 2, 3]
    assert outcome.empty_reason == "" and outcome.omitted == []


async def test_search_passes_scopes_and_times_to_the_reread():
    as_of = NOW - timedelta(days=30)
    h = harness([fact("a")], dense={"a": 0.9})
    await h.retriever.search([SCOPE, SCOPE, OTHER], "q", 5, Filters(as_of=as_of))
    assert h.facts.calls == [((SCOPE, OTHER), ("a",), as_of, None)]
    assert h.vectors.queries[0].as_of == as_of
    assert h.vectors.queries[0].scope_ids == (SCOPE, OTHER)


async def test_candidates_not_reread_or_out_of_scope_are_dropped():
    stray = fact("stray", scope_id=OTHER)
    h = harness([fact("a"), stray], dense={"a": 0.8, "gone": 0.95, "stray": 0.9})
    # A misbehaving source returning an out-of-scope fact is still not trusted.
    h.facts.batch_get_facts = _returning([fact("a"), stray])
    outcome = await h.retriever.search([SCOPE], "q", 10, Filters())
    assert keys(outcome) == ["a"]


def _returning(facts: list[Fact]):
    async def batch_get_facts(scope_ids, fact_keys, as_of, known_as_of):
        return facts

    return batch_get_facts


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(document_type="adr"), ["adr"]),
        (Filters(source_type="runbook"), ["runbook"]),
        (Filters(include_predicates=("owned_by",)), ["owner"]),
        (Filters(exclude_predicates=("uses", "owned_by")), ["adr", "runbook"]),
        (Filters(min_authority=0.9), ["adr"]),
        (Filters(max_trust_tier=1), ["owner", "plain"]),
    ],
)
async def test_attribute_filters(filters, expected):
    facts = [
        fact("adr", document_type="adr", predicate="decided", authority=0.95, trust_tier=2),
        fact("runbook", source_type="runbook", predicate="runs", trust_tier=3),
        fact("owner", predicate="owned_by"),
        fact("plain"),
    ]
    h = harness(facts, dense={f.fact_key: 0.5 for f in facts})
    outcome = await h.retriever.search([SCOPE], "q", 10, filters)
    assert sorted(keys(outcome)) == sorted(expected)


async def test_binding_boosts_raise_matches_and_hide_nothing():
    facts = [
        fact("generic"),
        fact("repo", repository="github.com/acme/shop"),
        fact("path", repository="github.com/acme/shop", code_path="src/billing"),
        fact("deeper", repository="github.com/acme/shop", code_path="src/billing/tax/rates.py"),
    ]
    h = harness(facts, dense={"generic": 0.8, "repo": 0.71, "path": 0.7, "deeper": 0.7})
    filters = Filters(repository="github.com/acme/shop", code_path="src/billing/invoice.py")
    outcome = await h.retriever.search([SCOPE], "q", 10, filters)
    assert keys(outcome) == ["path", "repo", "deeper", "generic"]
    by_key = {r.fact.fact_key: r for r in outcome.results}
    assert by_key["path"].signals["boost"] == pytest.approx(
        pipeline.REPOSITORY_BOOST * pipeline.CODE_PATH_BOOST
    )
    assert by_key["deeper"].signals["boost"] == pytest.approx(pipeline.REPOSITORY_BOOST)
    assert by_key["generic"].signals["boost"] == 1.0


def test_branch_and_path_boosts_need_the_same_repository():
    other_repo = fact("x", repository="github.com/acme/other", branch="main", code_path="src")
    filters = Filters(repository="github.com/acme/shop", branch="main", code_path="src/a.py")
    assert binding_boost(other_repo, filters) == 1.0
    unbound = fact("y", branch="main", code_path="./src/")
    assert binding_boost(unbound, filters) == pytest.approx(
        pipeline.BRANCH_BOOST * pipeline.CODE_PATH_BOOST
    )
    assert binding_boost(fact("z", code_path="src/ab"), Filters(code_path="src/abc")) == 1.0


def _disputed_facts() -> list[Fact]:
    return [
        fact(
            "port-a",
            subject="api",
            predicate="port",
            object="8080",
            state=FactState.DISPUTED,
            conflicting_fact_keys=("port-b",),
        ),
        fact(
            "port-b",
            subject="api",
            predicate="port",
            object="9090",
            state=FactState.DISPUTED,
            conflicting_fact_keys=("port-a", "port-c"),
        ),
        fact("calm"),
    ]


async def test_conflicts_are_grouped_once_per_subject_and_predicate():
    h = harness(_disputed_facts(), dense={"port-a": 0.9, "port-b": 0.8, "calm": 0.7})
    outcome = await h.retriever.search([SCOPE], "q", 10, Filters())
    assert keys(outcome) == ["port-a", "port-b", "calm"]
    assert len(outcome.conflicts) == 1
    conflict = outcome.conflicts[0]
    assert (conflict.subject, conflict.predicate) == ("api", "port")
    assert conflict.fact_keys == ("port-a", "port-b", "port-c")


@pytest.mark.parametrize(
    ("handling", "kept", "dropped"),
    [
        (ConflictHandling.EXCLUDE, ["calm"], ["port-a", "port-b"]),
        (ConflictHandling.ONLY, ["port-a", "port-b"], ["calm"]),
    ],
)
async def test_conflict_handling(handling, kept, dropped):
    h = harness(_disputed_facts(), dense={"port-a": 0.9, "port-b": 0.8, "calm": 0.7})
    outcome = await h.retriever.search([SCOPE], "q", 10, Filters(conflict_handling=handling))
    assert keys(outcome) == kept
    assert [(o.fact_key, o.reason) for o in outcome.omitted] == [
        (k, "conflict_handling") for k in dropped
    ]
    assert bool(outcome.conflicts) == (handling == ConflictHandling.ONLY)


async def test_limit_omits_the_rest_and_caps_the_list():
    facts = [fact(f"f{i:03d}") for i in range(80)]
    h = harness(facts, dense={f.fact_key: 0.9 - i * 0.001 for i, f in enumerate(facts)})
    h.retriever._pool = 100
    outcome = await h.retriever.search([SCOPE], "q", 5, Filters())
    assert keys(outcome) == ["f000", "f001", "f002", "f003", "f004"]
    assert len(outcome.omitted) == pipeline.OMITTED_CAP
    assert outcome.omitted[0].fact_key == "f005"
    assert {o.reason for o in outcome.omitted} == {"limit"}


async def test_stale_sources_warn_once_per_fact_and_source():
    old = NOW - timedelta(days=400)
    citations = (
        Citation(source_id="adr-7", locator="L1", observed_at=old, stale=True),
        Citation(source_id="adr-7", locator="L9", observed_at=old, stale=True),
        Citation(source_id="runbook", observed_at=NOW - timedelta(days=3)),
        Citation(source_id="unknown"),
    )
    h = harness([fact("a", citations=citations)], dense={"a": 0.9})
    outcome = await h.retriever.search([SCOPE], "q", 10, Filters())
    assert [
        (w.fact_key, w.source_id, w.reason, w.observed_at) for w in outcome.freshness_warnings
    ] == [("a", "adr-7", "source_stale", old)]


async def test_drifted_cited_lines_warn_with_the_drift_reason():
    drifted = Citation(source_id="github.com/acme/shop/pyproject.toml", locator="L6",
                       observed_at=NOW, stale=True, stale_reason="lines_changed")
    h = harness([fact("a", citations=(drifted,))], dense={"a": 0.9})
    outcome = await h.retriever.search([SCOPE], "q", 10, Filters())
    assert [(w.source_id, w.reason) for w in outcome.freshness_warnings] == [
        ("github.com/acme/shop/pyproject.toml", "lines_changed")]


async def test_empty_reasons():
    empty = harness([], dense={})
    empty.lexical.in_scope = False
    assert (await empty.retriever.search([SCOPE], "q", 5, Filters())).empty_reason == (
        "no_facts_in_scope"
    )

    no_match = harness([], dense={})
    assert (await no_match.retriever.search([SCOPE], "q", 5, Filters())).empty_reason == (
        "no_match"
    )

    pushed_down = harness([], dense={})
    pushed_down.lexical.matching_attributes = False
    outcome = await pushed_down.retriever.search([SCOPE], "q", 5, Filters(source_type="adr"))
    assert outcome.empty_reason == "filtered_out"

    post_filtered = harness([fact("a", document_type="note")], dense={"a": 0.9})
    outcome = await post_filtered.retriever.search([SCOPE], "q", 5, Filters(document_type="adr"))
    assert outcome.empty_reason == "filtered_out"

    retracted = harness([], dense={"a": 0.9})
    assert (await retracted.retriever.search([SCOPE], "q", 5, Filters())).empty_reason == (
        "no_match"
    )


@pytest.mark.parametrize(
    ("scopes", "query", "limit", "field"),
    [
        ([], "q", 5, "scope_ids"),
        ([""], "q", 5, "scope_ids"),
        ([SCOPE], " ", 5, "query"),
        ([SCOPE], "q", 51, "limit"),
        ([SCOPE], "q", -1, "limit"),
    ],
)
async def test_invalid_input(scopes, query, limit, field):
    h = harness([fact("a")], dense={"a": 0.9})
    with pytest.raises(InvalidInput) as caught:
        await h.retriever.search(scopes, query, limit, Filters())
    assert caught.value.field == field


def _sized(key: str, chars: int, **fields) -> Fact:
    """A fact whose rendering is exactly ``chars`` characters (with its one citation)."""
    base = fact(key, subject="s", predicate="p", object="", **fields)
    citation = Citation(source_id="src", locator="L1", excerpt="")
    base = replace(base, citations=(citation,))
    filler = chars - len(pipeline.render(base, compact=False)) - 1
    return replace(base, object="o" * filler)


async def test_assemble_keeps_results_within_the_token_budget():
    facts = [_sized("a", 400), _sized("b", 400), _sized("c", 400), _sized("d", 40)]
    h = harness(facts, dense={"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6})
    outcome = await h.retriever.assemble(SCOPE, "q", 3, 250, Filters(), compact=False)
    assert keys(outcome) == ["a", "b"]
    assert outcome.token_estimate == 200
    assert [(o.fact_key, o.reason) for o in outcome.omitted] == [
        ("c", "token_budget"),
        ("d", "limit"),
    ]
    assert outcome.assembler_version == CONTRACT
    assert outcome.empty_reason == ""


async def test_assemble_reports_a_budget_too_small_for_the_first_result():
    h = harness([_sized("a", 400)], dense={"a": 0.9})
    outcome = await h.retriever.assemble(SCOPE, "q", 5, 99, Filters(), compact=False)
    assert outcome.results == [] and outcome.token_estimate == 0
    assert outcome.empty_reason == "token_budget"
    assert [(o.fact_key, o.reason) for o in outcome.omitted] == [("a", "token_budget")]


async def test_compact_citations_cost_less_and_carry_only_id_and_locator():
    old = NOW - timedelta(days=999)
    citation = Citation(
        source_id="adr-7",
        locator="L1-9",
        title="Decision record",
        uri="https://example.invalid/adr-7",
        excerpt="x" * 400,
        verification=1,
        observed_at=old,
        stale=True,
    )
    a = fact("a", citations=(citation,))
    assert estimate_tokens(a, compact=True) < estimate_tokens(a, compact=False)
    h = harness([a], dense={"a": 0.9})
    outcome = await h.retriever.assemble(SCOPE, "q", 5, 2000, Filters(), compact=True)
    (result,) = outcome.results
    assert result.fact.citations == (Citation(source_id="adr-7", locator="L1-9", verification=1),)
    assert outcome.token_estimate == estimate_tokens(a, compact=True)
    # Freshness is judged on the full citation before it is compacted.
    assert [w.source_id for w in outcome.freshness_warnings] == ["adr-7"]


async def test_assemble_reads_one_scope_and_checks_the_budget():
    h = harness([fact("a")], dense={"a": 0.9})
    await h.retriever.assemble(SCOPE, "q", 0, 0, Filters(), compact=False)
    assert h.facts.calls[0][0] == (SCOPE,)
    with pytest.raises(InvalidInput):
        await h.retriever.assemble("", "q", 5, 2000, Filters(), compact=False)
    with pytest.raises(InvalidInput):
        await h.retriever.assemble(SCOPE, "q", 5, 32001, Filters(), compact=False)
