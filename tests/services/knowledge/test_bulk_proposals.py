"""Bulk proposals (a harvest filed for review) through a real knowledge service and
PostgreSQL: each keeps its source, locator, evidence, valid time and code binding through
the curator's verification; a predicate the ontology lacks is named and left out; the
same batch again proposes nothing twice; what the project holds is not proposed again."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import knowledge_settings, knowledge_stub

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc

MEMBER = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())
CURATOR = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
FILE = "github.com/acme/shop/services/api/pyproject.toml"
COMMIT_TIME = datetime(2026, 1, 1, 12, tzinfo=UTC)


@pytest.fixture
async def stub(pg_dsn: str) -> AsyncIterator[knowledge_pb2_grpc.KnowledgeServiceStub]:
    async with knowledge_stub(knowledge_settings(pg_dsn)) as s:
        yield s


def _request(*facts: pb.FactInput) -> pb.ProposeFactsRequest:
    observed = Timestamp()
    observed.FromDatetime(COMMIT_TIME)
    return pb.ProposeFactsRequest(
        principal_id=MEMBER, personal_scope_id=PERSONAL, target_scope_id=PROJECT,
        sources=[pb.SourceInput(source_id=FILE, source_type="repository_file",
                                title="services/api/pyproject.toml",
                                uri=f"https://{FILE}", observed_at=observed)],
        facts=list(facts))


def _fact(predicate: str, object_: str, locator: str, evidence: str) -> pb.FactInput:
    valid_from = Timestamp()
    valid_from.FromDatetime(COMMIT_TIME)
    return pb.FactInput(subject="shop-api", predicate=predicate, object=object_,
                        source_id=FILE, evidence=evidence, locator=locator,
                        valid_from=valid_from, repository="github.com/acme/shop",
                        branch="main", code_path="services/api", document_type="dependencies")


DEPENDS = _fact("depends_on", "asyncpg==0.29.0", "L6", '  "asyncpg==0.29.0",')
UNKNOWN = _fact("sings_in", "the choir", "L7", '  "choir",')


async def test_a_harvest_filed_for_review_keeps_its_citation_through_verification(stub) -> None:
    filed = await stub.ProposeFacts(_request(DEPENDS, UNKNOWN))
    assert (filed.created, filed.deduplicated) == (1, 0)
    assert list(filed.unknown_predicates) == ["sings_in"]
    key = filed.fact_keys[0]
    assert key and filed.fact_keys[1] == ""

    pending = await stub.ListPendingProposals(pb.ListPendingProposalsRequest(scope_id=PROJECT))
    assert [(p.fact_key, list(p.evidence)) for p in pending.proposals] == [
        (key, ['  "asyncpg==0.29.0",'])]
    # What bulk review groups by: the harvest (repository, commit time) and the file.
    (listed,) = pending.proposals
    assert (listed.source_id, listed.locator, listed.source_uri, listed.repository) == (
        FILE, "L6", f"https://{FILE}", "github.com/acme/shop")
    assert listed.source_observed_at.ToDatetime(tzinfo=UTC) == COMMIT_TIME
    again = await stub.ProposeFacts(_request(DEPENDS))
    assert (again.created, again.deduplicated) == (0, 1)

    verified = await stub.VerifyProposal(pb.VerifyProposalRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key))
    fact = verified.fact
    assert (fact.repository, fact.branch, fact.code_path) == (
        "github.com/acme/shop", "main", "services/api")
    assert fact.valid_from.ToDatetime(tzinfo=UTC) == COMMIT_TIME
    (citation,) = fact.citations
    assert (citation.source_id, citation.locator, citation.excerpt) == (
        FILE, "L6", '  "asyncpg==0.29.0",')
    # The project holds it now: filing the harvest again proposes nothing.
    assert (await stub.ProposeFacts(_request(DEPENDS))).deduplicated == 1


async def test_a_credential_in_a_bulk_proposal_is_refused_naming_its_field(stub) -> None:
    leaked = _fact("depends_on", "x", "L1", "token=ghp_0123456789abcdefABCDEF0123456789abcd")
    with pytest.raises(InvalidInput) as refused:
        await stub.ProposeFacts(_request(leaked))
    assert refused.value.field == "facts[0].evidence"
