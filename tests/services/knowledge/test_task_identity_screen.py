"""Every field of a proposal's task identity passes the secret screen, runtime and
repository_ref included: each is stored with the attempt and shown in reports."""

from __future__ import annotations

import uuid

import pytest

from vera.errors import InvalidInput
from vera.services.knowledge.domain import TaskContext
from vera.services.knowledge.policy import load_policy
from vera.services.knowledge.proposals import make_proposal

GITHUB_TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"


def proposal(context: TaskContext):
    return make_proposal(
        principal_id=str(uuid.uuid4()),
        personal_scope_id=str(uuid.uuid4()),
        readable_scope_ids=[],
        subject="payments-api",
        predicate="depends_on",
        object_="ledger",
        evidence_text="seen in handler.py",
        context=context,
    )


@pytest.mark.parametrize(
    ("field", "context"),
    [
        ("context.runtime", TaskContext.normalized(f"claude-code {GITHUB_TOKEN}", "", "", "")),
        (
            "context.repository_ref",
            TaskContext.normalized("", "", "", f"https://github.com/acme/{GITHUB_TOKEN}"),
        ),
    ],
)
def test_a_credential_in_the_task_identity_is_refused_naming_the_field(field, context):
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(proposal(context))
    assert caught.value.field == field
    assert caught.value.metadata["reason"] == "secret"


AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"


def test_the_runtime_is_screened_as_sent_not_casefolded():
    sent = TaskContext(f"claude-code {AWS_KEY_ID}", "", "", "")
    made = make_proposal(
        principal_id=str(uuid.uuid4()), personal_scope_id=str(uuid.uuid4()),
        readable_scope_ids=[], subject="payments-api", predicate="depends_on",
        object_="ledger", evidence_text="", context_as_sent=sent,
        context=TaskContext.normalized(sent.runtime, "", "", ""),
    )
    with pytest.raises(InvalidInput) as caught:
        load_policy().check(made)
    assert caught.value.field == "context.runtime"
    assert caught.value.metadata["reason"] == "secret"


def test_an_ordinary_task_identity_passes():
    context = TaskContext.normalized("claude-code", "s-1", "t-1", "git@github.com:acme/x.git")
    load_policy().check(proposal(context))
