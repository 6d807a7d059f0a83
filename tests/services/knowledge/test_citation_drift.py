"""Citation drift through a real knowledge service and PostgreSQL: the lines facts cite
from a repository's files are listed by source-id prefix, a drift mark makes the citation
served stale with the drift's reason (``lines_changed``), curators list what drifted, a
mark is known only from when it was found, and clearing it makes the citation fresh."""

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

CURATOR = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
REPO = "github.com/acme/shop/"
FILE = REPO + "pyproject.toml"


@pytest.fixture
async def stub(pg_dsn: str) -> AsyncIterator[knowledge_pb2_grpc.KnowledgeServiceStub]:
    async with knowledge_stub(knowledge_settings(pg_dsn)) as s:
        yield s


async def _seed(stub: knowledge_pb2_grpc.KnowledgeServiceStub) -> list[str]:
    loaded = await stub.IngestKnowledge(pb.IngestKnowledgeRequest(
        principal_id=CURATOR, scope_id=PROJECT,
        sources=[pb.SourceInput(source_id=FILE, source_type="repository_file"),
                 pb.SourceInput(source_id="adr-7", source_type="adr")],
        facts=[pb.FactInput(subject="shop", predicate="depends_on", object="asyncpg==0.29.0",
                            source_id=FILE, evidence='  "asyncpg==0.29.0",', locator="L6"),
               pb.FactInput(subject="shop", predicate="decided", object="PostgreSQL",
                            source_id="adr-7", evidence="We use PostgreSQL.", locator="L3")]))
    return list(loaded.fact_keys)


async def _citation(stub, key: str, **kw) -> pb.Citation:
    (fact,) = (await stub.BatchGetFacts(pb.BatchGetFactsRequest(
        scope_ids=[PROJECT], fact_keys=[key], **kw))).facts
    return fact.citations[0]


async def test_drifted_lines_are_served_stale_listed_for_curators_and_cleared(stub) -> None:
    key, adr_key = await _seed(stub)
    listed = await stub.ListCitedLines(pb.ListCitedLinesRequest(
        scope_id=PROJECT, source_id_prefix=REPO))
    assert [(c.fact_key, c.source_id, c.locator, c.evidence) for c in listed.cited] == [
        (key, FILE, "L6", '  "asyncpg==0.29.0",')]
    before = Timestamp()
    before.FromDatetime(datetime.now(UTC))

    marked = await stub.RecordCitationDrift(pb.RecordCitationDriftRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, commit="c2",
        drift=[pb.CitationDrift(fact_key=key, source_id=FILE, reason="lines_changed")]))
    assert (marked.marked, marked.cleared) == (1, 0)
    citation = await _citation(stub, key)
    assert citation.stale and citation.stale_reason == "lines_changed"
    assert not (await _citation(stub, adr_key)).stale
    # Before the drift was found, nobody knew of it.
    assert not (await _citation(stub, key, known_as_of=before)).stale
    drifted = await stub.ListCitedLines(pb.ListCitedLinesRequest(
        scope_id=PROJECT, source_id_prefix=REPO, drifted_only=True))
    assert [(c.fact_key, c.drift_reason, c.drift_commit) for c in drifted.cited] == [
        (key, "lines_changed", "c2")]
    again = await stub.RecordCitationDrift(pb.RecordCitationDriftRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, commit="c2",
        drift=[pb.CitationDrift(fact_key=key, source_id=FILE, reason="lines_changed")]))
    assert (again.marked, again.cleared) == (0, 0)

    cleared = await stub.RecordCitationDrift(pb.RecordCitationDriftRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, commit="c3",
        drift=[pb.CitationDrift(fact_key=key, source_id=FILE, reason="")]))
    assert (cleared.marked, cleared.cleared) == (0, 1)
    assert not (await _citation(stub, key)).stale
    assert not (await stub.ListCitedLines(pb.ListCitedLinesRequest(
        scope_id=PROJECT, source_id_prefix=REPO, drifted_only=True))).cited


async def test_a_drift_mark_with_an_unknown_reason_is_refused_naming_the_field(stub) -> None:
    key, _ = await _seed(stub)
    with pytest.raises(InvalidInput) as refused:
        await stub.RecordCitationDrift(pb.RecordCitationDriftRequest(
            curator_principal_id=CURATOR, scope_id=PROJECT, commit="c2",
            drift=[pb.CitationDrift(fact_key=key, source_id=FILE, reason="moved")]))
    assert refused.value.field == "drift[0].reason"
