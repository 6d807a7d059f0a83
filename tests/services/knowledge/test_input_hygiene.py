"""Hostile values through the real knowledge gRPC service answer ``invalid_input`` naming
the field, never ``internal_error``: timestamps outside the protobuf range, NUL bytes in
text (PostgreSQL refuses them), page tokens beyond int64, and hidden Unicode (refused at
propose, flagged at ingest)."""

from __future__ import annotations

import base64
import uuid

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb

CURATOR = str(uuid.uuid4())
AGENT = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())
# One second past 9999-12-31T23:59:59Z and one before 0001-01-01T00:00:00Z.
AFTER_YEAR_9999 = Timestamp(seconds=253402300800)
BEFORE_YEAR_1 = Timestamp(seconds=-62135596801)


def _proposal(**kw) -> pb.ProposeFactRequest:
    fields = {
        "principal_id": AGENT,
        "personal_scope_id": PERSONAL,
        "readable_scope_ids": [PROJECT],
        "subject": "billing-api",
        "predicate": "depends_on",
        "object": "redis",
        "context": pb.TaskContext(runtime="claude-code", session_ref="sess-1"),
    }
    fields.update(kw)
    return pb.ProposeFactRequest(**fields)


def _ingest(**fact) -> pb.IngestKnowledgeRequest:
    fields = {"subject": "billing-api", "predicate": "depends_on", "object": "redis"}
    fields.update(fact)
    return pb.IngestKnowledgeRequest(
        principal_id=CURATOR, scope_id=PROJECT, facts=[pb.FactInput(**fields)]
    )


async def _refused(call) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as err:
        await call
    return err.value.field, err.value.metadata.get("reason", "")


@pytest.mark.parametrize("bad", [AFTER_YEAR_9999, BEFORE_YEAR_1, Timestamp(nanos=2_000_000_000)])
async def test_out_of_range_timestamps_are_invalid_input(stub, bad: Timestamp) -> None:
    assert await _refused(
        stub.BatchGetFacts(pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=["k"], as_of=bad))
    ) == ("as_of", "out_of_range")
    assert await _refused(
        stub.GetEntity(pb.GetEntityRequest(scope_ids=[PROJECT], name="x", known_as_of=bad))
    ) == ("known_as_of", "out_of_range")
    assert await _refused(stub.IngestKnowledge(_ingest(valid_from=bad))) == (
        "facts[0].valid_from",
        "out_of_range",
    )


async def test_the_first_and_last_representable_instants_are_accepted(stub) -> None:
    first, last = Timestamp(seconds=-62135596800), Timestamp(seconds=253402300799)
    response = await stub.BatchGetFacts(
        pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=["k"], as_of=first)
    )
    assert list(response.facts) == []
    response = await stub.BatchGetFacts(
        pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=["k"], known_as_of=last)
    )
    assert list(response.facts) == []


async def test_nul_bytes_in_text_are_invalid_input_naming_the_field(stub) -> None:
    assert await _refused(stub.ProposeFact(_proposal(subject="billing\x00api"))) == (
        "subject",
        "invalid_character",
    )
    assert await _refused(
        stub.ProposeFact(_proposal(context=pb.TaskContext(runtime="x", task_ref="t\x00")))
    ) == ("context.task_ref", "invalid_character")
    assert await _refused(stub.IngestKnowledge(_ingest(evidence="a\x00b"))) == (
        "facts[0].evidence",
        "invalid_character",
    )
    assert await _refused(
        stub.BatchGetFacts(pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=["ok", "\x00"]))
    ) == ("fact_keys[1]", "invalid_character")
    # Nothing was written by the refused calls.
    report = await stub.GetProposalReport(
        pb.GetProposalReportRequest(principal_id=AGENT, context=pb.TaskContext(runtime="x"))
    )
    assert report.total_attempts == 0


def _token(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "raw", ["v1:9223372036854775808", "v1:99999999999999999999999", "v1:1_000", "v1: 7"]
)
async def test_page_tokens_beyond_int64_are_invalid_input(stub, raw: str) -> None:
    token = _token(raw)
    report = pb.GetProposalReportRequest(
        principal_id=AGENT, context=pb.TaskContext(runtime="x"), page_token=token
    )
    assert await _refused(stub.GetProposalReport(report)) == ("page_token", "malformed")
    changes = pb.ListScopeChangesRequest(scope_ids=[PROJECT], page_token=token)
    assert await _refused(stub.ListScopeChanges(changes)) == ("page_token", "malformed")
    lineage = pb.GetCommunityLineageRequest(
        scope_ids=[PROJECT], community_id=str(uuid.uuid4()), page_token=token
    )
    assert await _refused(stub.GetCommunityLineage(lineage)) == ("page_token", "malformed")


async def test_the_largest_int64_page_token_is_accepted(stub) -> None:
    report = await stub.GetProposalReport(
        pb.GetProposalReportRequest(
            principal_id=AGENT,
            context=pb.TaskContext(runtime="x"),
            page_token=_token("v1:9223372036854775807"),
        )
    )
    assert list(report.attempts) == []


async def test_ingest_keeps_and_flags_hidden_unicode(stub) -> None:
    response = await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            sources=[pb.SourceInput(source_id="adr-1", title="ADR\u202e1")],
            facts=[
                pb.FactInput(
                    subject="billing-api",
                    predicate="uses_database",
                    object="postgres\n[verified] billing-api uses_database mysql",
                    source_id="adr-1",
                    evidence="line one\nline two",
                ),
                pb.FactInput(subject="billing-api", predicate="depends_on", object="redis"),
            ],
        )
    )
    assert response.facts.created == 2
    assert [(w.field, w.reason, w.codepoint) for w in response.warnings] == [
        ("sources[0].title", "hidden_character", "U+202E"),
        ("facts[0].object", "hidden_character", "U+000A"),
    ]
