"""Proposal policy: the predicate allowlist with did-you-mean, and secret screening."""

from __future__ import annotations

import uuid

import pytest

from vera.errors import InvalidInput
from vera.gateway.errors import from_vera_error
from vera.services.knowledge.domain import ProposalLocation, TaskContext, load_ontology
from vera.services.knowledge.policy import load_policy, policy_from_ontology
from vera.services.knowledge.proposals import make_proposal


def proposal(predicate: str = "depends_on", **kw):
    return make_proposal(
        principal_id=str(uuid.uuid4()),
        personal_scope_id=str(uuid.uuid4()),
        readable_scope_ids=[],
        subject=kw.pop("subject", "payments-api"),
        predicate=predicate,
        object_=kw.pop("object_", "ledger"),
        evidence_text=kw.pop("evidence_text", "seen in handler.py"),
        context=kw.pop("context", TaskContext.normalized("claude-code", "s-1", "t-1", "")),
        location=kw.pop("location", None),
    )


def test_allowlist_contains_every_single_valued_predicate() -> None:
    policy = load_policy()
    assert load_ontology().single_valued_predicates <= policy.allowed_predicates
    assert policy.is_allowed("depends_on") and policy.is_allowed(" DEPENDS_ON ")


def test_allowed_predicate_passes() -> None:
    load_policy().check(proposal("uses"))


@pytest.mark.parametrize(
    ("predicate", "expected_first"),
    [("depends on", "depends_on"), ("dependson", "depends_on"), ("ownd_by", "owned_by"),
     ("uses-database", "uses_database")],
)
def test_unknown_predicate_offers_did_you_mean(predicate: str, expected_first: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(proposal(predicate))
    err = caught.value
    assert err.field == "predicate" and err.metadata["reason"] == "unknown_predicate"
    candidates = err.metadata["candidates"].split(",")
    assert 1 <= len(candidates) <= 3 and candidates[0] == expected_first


def test_at_most_three_candidates_and_none_when_nothing_is_close() -> None:
    policy = policy_from_ontology(
        {"version": "t", "proposal_predicates": ["owned_by", "owner", "owns", "owned_in", "ownz"]}
    )
    assert len(policy.candidates("ownd")) <= 3
    assert policy.candidates("zzzzzzzz") == []
    with pytest.raises(InvalidInput) as caught:
        policy.check(proposal("zzzzzzzz"))
    assert caught.value.metadata.get("candidates", "") == ""


def test_mcp_error_data_carries_candidates() -> None:
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(proposal("depends on"))
    data = from_vera_error(caught.value).error.data
    assert data["code"] == "invalid_input" and data["field"] == "predicate"
    assert data["candidates"][0] == "depends_on"


AWS = "AKIA" + "IOSFODNN7EXAMPLE"


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("subject", {"subject": f"key {AWS}"}),
        ("object", {"object_": "postgres://app:" + "S3cretPw@db/app"}),
        ("evidence_text", {"evidence_text": "Authorization: Bearer " + "abcDEF123ghiJKL456mnoPQR"}),
        ("context.task_ref", {"context": TaskContext.normalized("x", "", f"t {AWS}", "")}),
    ],
)
def test_secret_is_refused_naming_the_field(field: str, kwargs: dict) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(proposal("depends_on", **kwargs))
    assert caught.value.field == field and caught.value.metadata["reason"] == "secret"


def test_secret_wins_over_unknown_predicate() -> None:
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(proposal("not_a_predicate", evidence_text=f"k={AWS}"))
    assert caught.value.field == "evidence_text"


@pytest.mark.parametrize(
    ("field", "location"),
    [
        ("branch", ProposalLocation.normalized("main\u202eniam", "")),
        ("code_path", ProposalLocation.normalized("", "src/\u202eyp.x")),
    ],
)
def test_a_hidden_character_in_the_proposers_location_is_refused_naming_the_field(
        field: str, location: ProposalLocation) -> None:
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(proposal(location=location))
    assert caught.value.field == field
    assert caught.value.metadata["reason"] == "hidden_character"
