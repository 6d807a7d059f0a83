"""What the pages read besides the queue itself: per-project counts, the facts a proposal
names (the active fact it would contradict, the one it duplicates), and a decision's form
read as its declared body."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vera import fields as vera_fields
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_resources_pb2 as rpb
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends

# The tiers a curator may choose (the knowledge service enforces 0..3; 1 is its default).
HUMAN_TIERS = (0, 1, 2, 3)

B = TypeVar("B", bound=BaseModel)


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


def form_body(model: type[B], fields: dict[str, str]) -> B:
    """A decision's form as the body the REST route takes (``vera.api.curating``): the
    model's own fields (an empty one left unset), text converted as the model declares;
    a refused value is ``invalid_input`` naming it."""
    values = {name: text for name, text in fields.items()
              if name in model.model_fields and text != ""}
    try:
        return model.model_validate(values, strict=False)
    except ValidationError as refused:
        error = vera_fields.first_error(refused.errors())
        name = vera_fields.error_field(error, values, error["loc"]) or "form"
        raise InvalidInput(name, error["msg"], reason=vera_fields.reason(error)) from None
