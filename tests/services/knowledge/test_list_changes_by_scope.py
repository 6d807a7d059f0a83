"""ListChanges restricted to scopes (what snapshot creation reads), through a real gRPC
server against a real PostgreSQL database."""

from __future__ import annotations

import uuid

import pytest

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb

CURATOR = str(uuid.uuid4())
MINE = str(uuid.uuid4())
THEIRS = str(uuid.uuid4())


async def ingest(stub, scope: str, count: int) -> None:
    await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=scope,
            sources=[pb.SourceInput(source_id="adr-1", source_type="adr", title="ADR 1")],
            facts=[
                pb.FactInput(
                    subject=f"svc-{i}",
                    predicate="uses_database",
                    object="postgres",
                    source_id="adr-1",
                    evidence=f"svc-{i} uses postgres",
                    locator="L1",
                )
                for i in range(count)
            ],
        )
    )


async def test_a_scoped_read_returns_only_that_scopes_changes(stub) -> None:
    await ingest(stub, THEIRS, 20)
    await ingest(stub, MINE, 2)
    await ingest(stub, THEIRS, 20)
    everything = await stub.ListChanges(pb.ListChangesRequest(page_size=1000))
    mine = await stub.ListChanges(pb.ListChangesRequest(page_size=1000, scope_ids=[MINE]))
    facts = [c.fact for c in mine.changes if c.kind == pb.CHANGE_KIND_FACT_UPSERTED]
    assert len(facts) == 2 and {f.scope_id for f in facts} == {MINE}
    assert len(mine.changes) < len(everything.changes)
    # Positions stay the log's own, and the head is the whole log's.
    expected = [
        c.position
        for c in everything.changes
        if c.kind != pb.CHANGE_KIND_FACT_UPSERTED or c.fact.scope_id == MINE
    ]
    own = [c.position for c in mine.changes]
    assert set(own) <= set(expected) and own == sorted(own)
    assert mine.head_position == everything.head_position
    both = await stub.ListChanges(pb.ListChangesRequest(page_size=1000, scope_ids=[MINE, THEIRS]))
    assert [c.position for c in both.changes] == [c.position for c in everything.changes]


async def test_a_malformed_scope_is_invalid_input(stub) -> None:
    with pytest.raises(InvalidInput) as err:
        await stub.ListChanges(pb.ListChangesRequest(scope_ids=["acme"]))
    assert err.value.field == "scope_ids[0]"
