"""What the pages read besides the queue itself: per-project counts, the facts a proposal
names (the active fact it would contradict, the one it duplicates), and form numbers."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_resources_pb2 as rpb
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends

# The tiers a curator may choose (the knowledge service enforces 0..3; 1 is its default).
HUMAN_TIERS = (0, 1, 2, 3)


@dataclass(frozen=True)
class ProjectCounts:
    """The smallest pages of the two lists, for their (possibly lower-bound) totals."""

    pending: kpb.ListPendingProposalsResponse
    conflicted: kpb.ListConflictedAttemptsResponse


async def counts(backends: Backends, project_id: str) -> ProjectCounts:
    """The totals the list RPCs report, from their smallest page."""
    pending = await backends.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(scope_id=project_id, page_size=1))
    conflicted = await backends.knowledge.ListConflictedAttempts(
        kpb.ListConflictedAttemptsRequest(scope_id=project_id, page_size=1))
    return ProjectCounts(pending, conflicted)


async def facts_by_key(
    backends: Backends, project_id: str, keys: Iterable[str]
) -> dict[str, rpb.Fact]:
    """The project's current facts with these keys, in one call."""
    wanted = sorted(k for k in set(keys) if k)
    if not wanted:
        return {}
    reply = await backends.knowledge.BatchGetFacts(
        kpb.BatchGetFactsRequest(scope_ids=[project_id], fact_keys=wanted))
    return {fact.fact_key: fact for fact in reply.facts}


def parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidInput(name, reason="malformed") from None


def parse_float(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(name, reason="malformed") from None
    if not math.isfinite(value):
        raise InvalidInput(name, reason="malformed")
    return value
