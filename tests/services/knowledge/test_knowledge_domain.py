"""Unit tests of the knowledge rules (no database, no gRPC)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from vera import page_tokens
from vera.errors import InvalidInput
from vera.services.knowledge import domain, ingest, proposals
from vera.services.knowledge.domain import FactState, Outcome, TaskContext
from vera.services.knowledge.proposals import ProposalFindings

SCOPE = uuid.UUID("11111111-1111-4111-8111-111111111111")
OTHER = uuid.UUID("22222222-2222-4222-8222-222222222222")


def test_normalize_nfkc_casefold_whitespace() -> None:
    assert domain.normalize("  Ｐａｙments\t  Service\n") == "payments service"
    assert domain.normalize("STRASSE") == domain.normalize("straße")


def test_fact_key_is_stable_normalized_and_scoped() -> None:
    key = domain.fact_key(SCOPE, "Payments", "owned_by", "Team A")
    assert key.startswith("fk_") and len(key) == 3 + 24
    assert key == domain.fact_key(str(SCOPE), " payments ", "OWNED_BY", "team   a")
    assert key != domain.fact_key(OTHER, "Payments", "owned_by", "Team A")
    assert key != domain.fact_key(SCOPE, "Payments", "owned_by", "Team B")


def test_ontology_lists_single_valued_predicates() -> None:
    ontology = domain.load_ontology()
    assert ontology.version
    assert ontology.is_single_valued("Owned_By")
    assert not ontology.is_single_valued("depends_on")


@pytest.mark.parametrize(
    ("ref", "canonical"),
    [
        ("https://user:secret@GitHub.com/Org/Repo.git?ref=x#frag", "github.com/Org/Repo"),
        ("git@github.com:org/repo.git", "github.com/org/repo"),
        ("ssh://git@GitLab.example.com:2222/team/app.git/", "gitlab.example.com/team/app"),
        ("github.com/org/repo", "github.com/org/repo"),
        ("/home/me/src/repo", ""),
        ("~/src/repo", ""),
        ("C:\\src\\repo", ""),
        ("file:///home/me/repo", ""),
        ("", ""),
    ],
)
def test_canonical_repository(ref: str, canonical: str) -> None:
    assert domain.canonical_repository(ref) == canonical


def test_task_identity_uses_every_supplied_field() -> None:
    a = TaskContext.normalized("Claude-Code", " s1 ", "t1", "git@github.com:o/r.git")
    b = TaskContext.normalized("claude-code", "s1", "t1", "https://github.com/o/r")
    assert a == b and a.identity() == b.identity()
    assert a.identity() != TaskContext.normalized("claude-code", "s1", "", "").identity()
    assert TaskContext.normalized("", "", "", "").is_empty()
    with pytest.raises(InvalidInput) as err:
        TaskContext.normalized("x" * 5000, "", "", "")
    assert err.value.field == "context.runtime"


def test_page_token_round_trip_and_rejects_garbage() -> None:
    assert page_tokens.decode_position(page_tokens.encode_position(42)) == 42
    assert page_tokens.decode_position("") == 0
    for bad in ("not-a-token!", page_tokens.encode_position(1)[:-2] + "zz", "djI6MQ"):
        with pytest.raises(InvalidInput) as err:
            page_tokens.decode_position(bad)
        assert err.value.field == "page_token"


def _fact(**overrides):
    args = dict(
        subject="svc",
        predicate="owned_by",
        object_="team",
        source_id="",
        evidence="",
        locator="",
        valid_from=None,
        valid_to=None,
        trust_tier=None,
        authority=None,
        repository="",
        branch="",
        code_path="",
        document_type="",
    )
    args.update(overrides)
    return ingest.validate_fact(3, SCOPE, **args)


def test_validate_fact_defaults_and_field_names() -> None:
    fact = _fact(repository="https://u:p@github.com/o/r.git")
    assert (fact.trust_tier, fact.authority) == (1, 0.7)
    assert fact.repository == "github.com/o/r"
    assert _fact(trust_tier=0, authority=0.0).trust_tier == 0
    with pytest.raises(InvalidInput) as err:
        _fact(repository="/home/me/repo")
    assert err.value.field == "facts[3].repository"
    cases = {
        "facts[3].subject": dict(subject="  "),
        "facts[3].predicate": dict(predicate=""),
        "facts[3].object": dict(object_=""),
        "facts[3].trust_tier": dict(trust_tier=5),
        "facts[3].authority": dict(authority=float("nan")),
        "facts[3].valid_to": dict(
            valid_from=datetime(2024, 2, 1, tzinfo=UTC), valid_to=datetime(2024, 1, 1, tzinfo=UTC)
        ),
    }
    for field_name, overrides in cases.items():
        with pytest.raises(InvalidInput) as err:
            _fact(**overrides)
        assert err.value.field == field_name


def test_check_batch_requires_known_sources() -> None:
    fact = _fact(source_id="adr-1")
    batch = ingest.IngestBatch(uuid.uuid4(), SCOPE, (), (), (fact,))
    with pytest.raises(InvalidInput) as err:
        ingest.check_batch(batch, set())
    assert err.value.field == "facts[0].source_id"
    ingest.check_batch(batch, {"adr-1"})


def _proposal(predicate: str = "owned_by") -> proposals.Proposal:
    return proposals.make_proposal(
        principal_id=str(uuid.uuid4()),
        personal_scope_id=str(SCOPE),
        readable_scope_ids=[str(OTHER)],
        subject="svc",
        predicate=predicate,
        object_="team",
        evidence_text="",
        context=TaskContext.normalized("rt", "s", "", ""),
    )


def _findings(**overrides) -> ProposalFindings:
    args = dict(
        known_fact_key=None,
        conflicting_fact_keys=(),
        pending_in_personal_scope=False,
        created_in_task=0,
    )
    args.update(overrides)
    return ProposalFindings(**args)


def test_decide_proposal_order() -> None:
    ontology = domain.load_ontology()
    p = _proposal()
    everything = _findings(
        known_fact_key="fk_known",
        conflicting_fact_keys=("fk_c",),
        pending_in_personal_scope=True,
        created_in_task=99,
    )
    assert proposals.decide_proposal(p, everything, ontology).outcome is Outcome.SKIPPED
    conflicted = proposals.decide_proposal(
        p, _findings(conflicting_fact_keys=("fk_c",), pending_in_personal_scope=True), ontology
    )
    assert (conflicted.outcome, conflicted.reason) == (Outcome.CONFLICTED, "single_valued_conflict")
    assert conflicted.conflicting_fact_keys == ("fk_c",)
    multi = proposals.decide_proposal(
        _proposal("depends_on"), _findings(conflicting_fact_keys=("fk_c",)), ontology
    )
    assert multi.outcome is Outcome.CREATED
    dedup = _findings(pending_in_personal_scope=True, created_in_task=99)
    assert proposals.decide_proposal(p, dedup, ontology).outcome is Outcome.DEDUPLICATED
    limited = proposals.decide_proposal(p, _findings(created_in_task=50), ontology)
    assert (limited.outcome, limited.reason) == (Outcome.REJECTED, "task_limit")
    assert proposals.decide_proposal(p, _findings(created_in_task=49), ontology).outcome is (
        Outcome.CREATED
    )


def test_make_proposal_validates() -> None:
    with pytest.raises(InvalidInput) as err:
        proposals.make_proposal(
            principal_id="nope",
            personal_scope_id=str(SCOPE),
            readable_scope_ids=[],
            subject="s",
            predicate="p",
            object_="o",
            evidence_text="",
            context=TaskContext(),
        )
    assert err.value.field == "principal_id"
    with pytest.raises(InvalidInput) as err:
        proposals.make_proposal(
            principal_id=str(uuid.uuid4()),
            personal_scope_id=str(SCOPE),
            readable_scope_ids=[],
            subject="s" * 513,
            predicate="p",
            object_="o",
            evidence_text="",
            context=TaskContext(),
        )
    assert err.value.field == "subject"


def test_displayed_state_and_excerpt() -> None:
    assert domain.displayed_state("ACTIVE", ("fk_x",)) is FactState.DISPUTED
    assert domain.displayed_state("ACTIVE", ()) is FactState.ACTIVE
    assert domain.displayed_state("PROPOSED", ("fk_x",)) is FactState.PROPOSED
    assert len(domain.excerpt("x" * 900)) == 500


def _version(state: FactState, superseded_by: str = "") -> domain.FactView:
    return domain.FactView(
        fact_key="fk_old", version_id=uuid.uuid4(), scope_id=SCOPE, subject="payments",
        predicate="uses_database", object="MySQL", state=state, trust_tier=1, authority=0.8,
        valid_from=None, valid_to=datetime(2025, 6, 1, tzinfo=UTC),
        recorded_at=datetime(2024, 1, 1, tzinfo=UTC), superseded_at=None, repository="",
        branch="", code_path="", document_type="", source_type="", superseded_by=superseded_by,
    )


def test_a_replaced_key_answers_its_last_version_superseded_by_the_replacement() -> None:
    answer = domain.answer_after_replacement(_version(FactState.ACTIVE, superseded_by="fk_new"))
    assert answer is not None
    assert (answer.state, answer.superseded_by, answer.object) == (
        FactState.SUPERSEDED, "fk_new", "MySQL")
    # A fact that merely stopped being valid has no replacement to point at.
    assert domain.answer_after_replacement(_version(FactState.ACTIVE)) is None


def test_the_lowest_trust_tier_is_the_most_trusted() -> None:
    def assertion(tier: int) -> domain.AssertionView:
        return domain.AssertionView(
            assertion_id=uuid.uuid4(), supports=True, trust_tier=tier, authority=0.5,
            verification=domain.Verification.VERIFIED, source=None, evidence=(),
            recorded_at=datetime(2024, 1, 1, tzinfo=UTC))
    ranked = domain.best_first([assertion(4), assertion(0), assertion(2)])
    assert [a.trust_tier for a in ranked] == [0, 2, 4]
