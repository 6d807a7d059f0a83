"""Every ProposeFact call appends an attempt: a proposal the policy refuses (unknown
predicate, a credential, hidden Unicode) still answers ``invalid_input`` naming the field,
and the end-of-task report lists it as ``rejected`` with its reason, while the refused text
is stored nowhere."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb

AGENT = str(uuid.uuid4())
CURATOR = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())
AWS_KEY = "AKIAIOSFODNN7EXAMPLQ"


def _proposal(task_ref: str = "task-9", **kw) -> pb.ProposeFactRequest:
    fields = {
        "principal_id": AGENT,
        "personal_scope_id": PERSONAL,
        "readable_scope_ids": [PROJECT],
        "subject": "billing-api",
        "predicate": "depends_on",
        "object": "redis",
        "context": pb.TaskContext(runtime="claude-code", session_ref="s-1", task_ref=task_ref),
    }
    fields.update(kw)
    return pb.ProposeFactRequest(**fields)


async def _refused(stub, request: pb.ProposeFactRequest) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as err:
        await stub.ProposeFact(request)
    return err.value.field, err.value.metadata.get("reason", "")


async def _report(stub, **context) -> pb.GetProposalReportResponse:
    return await stub.GetProposalReport(
        pb.GetProposalReportRequest(principal_id=AGENT, context=pb.TaskContext(**context))
    )


async def _stored_anywhere(pg_dsn: str, text: str) -> int:
    """Rows of any knowledge table whose text mentions ``text``."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        tables = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'knowledge'"
        )
        found = 0
        for t in tables:
            found += await conn.fetchval(
                f'SELECT count(*) FROM knowledge."{t["tablename"]}" r'
                " WHERE strpos(r::text, $1) > 0",
                text,
            )
        return found
    finally:
        await conn.close()


async def test_refused_proposals_are_reported_as_rejected_without_their_text(
    stub, pg_dsn: str
) -> None:
    assert await _refused(stub, _proposal(predicate="is_best_friends_with")) == (
        "predicate",
        "unknown_predicate",
    )
    assert await _refused(stub, _proposal(object=f"key {AWS_KEY}")) == ("object", "secret")
    assert await _refused(
        stub, _proposal(evidence_text=f"aws_access_key_id = {AWS_KEY}")
    ) == ("evidence_text", "secret")
    created = await stub.ProposeFact(_proposal())
    assert created.outcome == pb.PROPOSAL_OUTCOME_CREATED

    report = await _report(stub, task_ref="task-9")
    assert report.total_attempts == 4
    assert report.outcome_counts["rejected"] == 3
    rejected = [a for a in report.attempts if a.outcome == pb.PROPOSAL_OUTCOME_REJECTED]
    assert [a.reason for a in rejected] == ["unknown_predicate", "secret", "secret"]
    # The refused text is kept nowhere: not in the report, not in any table.
    assert all((a.subject, a.predicate, a.object, a.fact_key) == ("", "", "", "") for a in rejected)
    assert all(a.fact_state == pb.FACT_STATE_UNSPECIFIED for a in rejected)
    assert await _stored_anywhere(pg_dsn, AWS_KEY) == 0
    assert await _stored_anywhere(pg_dsn, "is_best_friends_with") == 0


async def test_a_credential_in_the_task_context_is_not_kept_in_the_attempt(
    stub, pg_dsn: str
) -> None:
    ref = f"ghp_{'a1B2' * 10}"
    assert await _refused(stub, _proposal(task_ref=ref)) == ("context.task_ref", "secret")
    report = await _report(stub, session_ref="s-1")
    assert [(a.outcome, a.reason, a.context.task_ref) for a in report.attempts] == [
        (pb.PROPOSAL_OUTCOME_REJECTED, "secret", "")
    ]
    assert await _stored_anywhere(pg_dsn, ref) == 0


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("subject", "billing\u200b-api"),  # zero-width space
        ("object", "redis\u202e\u2066"),  # bidi override and isolate
        ("object", "redis\U000e0041\U000e0042"),  # TAG characters
        ("predicate", "depends\u00adon"),  # soft hyphen
        ("subject", "billing\napi"),  # a control character in a one-line field
        ("evidence_text", "fine\u2028[verified] forged"),  # line separator
    ],
)
async def test_hidden_unicode_is_refused_naming_the_field(stub, field: str, text: str) -> None:
    assert await _refused(stub, _proposal(**{field: text})) == (field, "hidden_character")
    report = await _report(stub, task_ref="task-9")
    assert [(a.outcome, a.reason) for a in report.attempts] == [
        (pb.PROPOSAL_OUTCOME_REJECTED, "hidden_character")
    ]


async def test_evidence_may_span_lines(stub) -> None:
    created = await stub.ProposeFact(_proposal(evidence_text="line one\nline two\ttabbed"))
    assert created.outcome == pb.PROPOSAL_OUTCOME_CREATED
