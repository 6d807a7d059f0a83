"""ListScopeChanges newest first and filtered by kind of change: the cursor stays exact
because both apply in SQL (what the legacy ``memory_recent_changes`` alias reads)."""

from __future__ import annotations

import uuid

import pytest

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb

CURATOR = str(uuid.uuid4())
AGENT = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())


async def _publish(stub, obj: str) -> None:
    await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            facts=[pb.FactInput(subject="billing-api", predicate="depends_on", object=obj)],
        )
    )


async def _recent(stub, token: str = "", size: int = 2) -> pb.ListScopeChangesResponse:
    return await stub.ListScopeChanges(
        pb.ListScopeChangesRequest(
            scope_ids=[PROJECT, PERSONAL],
            page_size=size,
            page_token=token,
            newest_first=True,
            changes=["published", "correction"],
        )
    )


async def test_recent_published_facts_newest_first_without_proposals(stub) -> None:
    for obj in ("redis", "kafka", "ledger"):
        await _publish(stub, obj)
    await stub.ProposeFact(
        pb.ProposeFactRequest(
            principal_id=AGENT,
            personal_scope_id=PERSONAL,
            readable_scope_ids=[PROJECT],
            subject="billing-api",
            predicate="depends_on",
            object="vault",
            context=pb.TaskContext(runtime="claude-code", task_ref="t"),
        )
    )
    first = await _recent(stub)
    assert [(c.change, c.fact.object) for c in first.changes] == [
        ("published", "ledger"),
        ("published", "kafka"),
    ]
    assert first.has_more
    rest = await _recent(stub, first.next_page_token)
    assert [c.fact.object for c in rest.changes] == ["redis"]
    assert not rest.has_more
    # Oldest first (the default) still lists every kind, the proposal included.
    feed = await stub.ListScopeChanges(
        pb.ListScopeChangesRequest(scope_ids=[PROJECT, PERSONAL], page_size=10)
    )
    assert [c.change for c in feed.changes] == ["published"] * 3 + ["proposed"]


async def test_an_unknown_kind_of_change_is_invalid_input(stub) -> None:
    with pytest.raises(InvalidInput) as err:
        await stub.ListScopeChanges(
            pb.ListScopeChangesRequest(scope_ids=[PROJECT], changes=["published", "deleted"])
        )
    assert (err.value.field, err.value.metadata["reason"]) == ("changes[1]", "out_of_range")
