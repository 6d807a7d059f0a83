"""What the pages read besides the queue itself: per-project counts, the facts a proposal
names (the active fact it would contradict, the one it duplicates), pending proposals
grouped for bulk review, and a decision's form read as its declared body."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, ValidationError

from vera import fields as vera_fields
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_resources_pb2 as rpb
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends

# The tiers a curator may choose (the knowledge service enforces 0..3; 1 is its default).
HUMAN_TIERS = (0, 1, 2, 3)

B = TypeVar("B", bound=BaseModel)
# A group decision's proposals travel in one form field, separated by spaces (fact keys
# hold none): a form keeps one value per field.
KEY_SEPARATOR = " "


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


@dataclass
class FileGroup:
    """The pending proposals citing one source (a harvested file), in queue order."""

    source_id: str
    proposals: list[rpb.PendingProposal] = field(default_factory=list)

    @property
    def fact_keys(self) -> str:
        return KEY_SEPARATOR.join(p.fact_key for p in self.proposals)


@dataclass
class HarvestGroup:
    """The proposals of one harvest: one repository at one commit (its sources observed at
    the commit's time), by file."""

    repository: str
    observed_at: Timestamp
    commit_uri: str
    files: dict[str, FileGroup] = field(default_factory=dict)

    @property
    def fact_keys(self) -> str:
        return KEY_SEPARATOR.join(g.fact_keys for g in self.files.values())

    @property
    def size(self) -> int:
        return sum(len(g.proposals) for g in self.files.values())


def harvest_groups(
    proposals: Sequence[rpb.PendingProposal],
) -> tuple[list[HarvestGroup], int]:
    """Proposals that cite a source, by harvest and then by file, in queue order; and how
    many cite none (an agent's, reviewed one by one in the queue)."""
    harvests: dict[tuple[str, int, int], HarvestGroup] = {}
    uncited = 0
    for proposal in proposals:
        if not proposal.source_id:
            uncited += 1
            continue
        stamp = proposal.source_observed_at
        key = (proposal.repository, stamp.seconds, stamp.nanos)
        harvest = harvests.setdefault(key, HarvestGroup(
            proposal.repository, stamp, proposal.source_uri))
        harvest.files.setdefault(
            proposal.source_id, FileGroup(proposal.source_id)).proposals.append(proposal)
    return list(harvests.values()), uncited


def group_keys(fields: dict[str, str]) -> list[str]:
    """The proposals a group decision names (``fact_keys``)."""
    return [key for key in fields.get("fact_keys", "").split(KEY_SEPARATOR) if key]
