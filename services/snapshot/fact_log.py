"""FactLog over knowledge's change log (ListChanges): the scope's fact versions that were
live at the snapshot's boundaries.

The change log carries every fact version each time it is recorded or changes state, so
the last entry per version is its current row. A version counts when it was recorded by
``known_as_of``, not superseded by then, live (or superseded only later), and valid at
``as_of``. Only the scope's own changes are read (a scoped ListChanges), so cost is
proportional to that scope's log, not every tenant's; it is still why snapshot creation
is a high-cost, separately budgeted tool. Memory is one page plus the snapshot's own
records.
"""

from __future__ import annotations

from datetime import datetime

import grpc

from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.timestamps import from_timestamp
from vera.services.snapshot.snapshots import Freeze, FrozenFact

PAGE_SIZE = 1000
_LIVE = {
    knowledge_pb2.FACT_STATE_PROPOSED,
    knowledge_pb2.FACT_STATE_ACTIVE,
    knowledge_pb2.FACT_STATE_DISPUTED,
}


def _counts(fact: knowledge_pb2.Fact, as_of: datetime, known_as_of: datetime) -> bool:
    recorded, superseded = (
        from_timestamp(fact, "recorded_at"),
        from_timestamp(fact, "superseded_at"),
    )
    if recorded is None or recorded > known_as_of:
        return False
    if superseded is not None and superseded <= known_as_of:
        return False
    if fact.state not in _LIVE and not (
        fact.state == knowledge_pb2.FACT_STATE_SUPERSEDED and superseded is not None
    ):
        return False
    valid_from, valid_to = from_timestamp(fact, "valid_from"), from_timestamp(fact, "valid_to")
    if valid_from is not None and valid_from > as_of:
        return False
    return valid_to is None or valid_to > as_of


def _frozen(fact: knowledge_pb2.Fact) -> FrozenFact:
    return FrozenFact(
        fact_key=fact.fact_key,
        version_id=fact.version_id,
        source_ids=tuple(sorted({c.source_id for c in fact.citations if c.source_id})),
        source_observed_at=tuple(
            t for c in fact.citations if (t := from_timestamp(c, "observed_at")) is not None
        ),
    )


class KnowledgeFactLog:
    """Calls go through a channel from ``vera.rpc.client.open_channel``: each has a deadline
    and failures arrive as VeraError."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)

    async def active_facts(self, scope_id: str, as_of: datetime, known_as_of: datetime) -> Freeze:
        # Each page is folded in as it arrives and then dropped: what stays is the compact
        # record of each version that counts after its latest entry so far, never the
        # log's fact messages (text, citations, excerpts).
        kept: dict[str, FrozenFact] = {}
        position = 0
        while True:
            page = await self._stub.ListChanges(
                knowledge_pb2.ListChangesRequest(
                    after_position=position, page_size=PAGE_SIZE, scope_ids=[scope_id]
                )
            )
            for change in page.changes:
                position = max(position, change.position)
                if change.kind != knowledge_pb2.CHANGE_KIND_FACT_UPSERTED or not change.HasField(
                    "fact"
                ):
                    continue
                fact = change.fact
                if fact.scope_id != scope_id:
                    continue
                if _counts(fact, as_of, known_as_of):
                    kept[fact.version_id] = _frozen(fact)
                else:
                    kept.pop(fact.version_id, None)
            if len(page.changes) < PAGE_SIZE:
                # A short page read every change of the scope up to the log's head then.
                position = max(position, page.head_position)
                break
        frozen = sorted(kept.values(), key=lambda f: (f.fact_key, f.version_id))
        return Freeze(facts=frozen, change_position=position)
