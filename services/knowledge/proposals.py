"""Rules of an agent's proposal: its input, the decision (created, deduplicated,
skipped, conflicted, rejected) and the end-of-task report's views.

Pure code: no gRPC, no asyncpg.
"""


import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from vera.errors import InvalidInput
from vera.request_fields import optional_uuid, parse_uuid, parse_uuids

from .domain import (
    MAX_EVIDENCE,
    MAX_OBJECT,
    MAX_PREDICATE,
    MAX_SUBJECT,
    TASK_PROPOSAL_LIMIT,
    FactState,
    FactView,
    Ontology,
    Outcome,
    ProposalLocation,
    TaskContext,
    bound_text,
    fact_key,
    normalize,
    require_text,
)


@dataclass(frozen=True)
class Proposal:
    principal_id: uuid.UUID
    personal_scope_id: uuid.UUID
    readable_scope_ids: tuple[uuid.UUID, ...]
    subject: str
    predicate: str
    object: str
    evidence_text: str
    context: TaskContext
    fact_key: str
    # The shared project whose curators review it: the one its task is bound to, or none.
    target_scope_id: uuid.UUID | None = None
    # The task identity as the caller sent it, for the secret screen: normalizing casefolds
    # the runtime, which would hide case-sensitive credential shapes (AKIA…, eyJ…).
    context_as_sent: TaskContext | None = None
    location: ProposalLocation = field(default_factory=ProposalLocation)

    @property
    def subject_norm(self) -> str:
        return normalize(self.subject)

    @property
    def predicate_norm(self) -> str:
        return normalize(self.predicate)

    @property
    def object_norm(self) -> str:
        return normalize(self.object)

    @property
    def lookup_scope_ids(self) -> tuple[uuid.UUID, ...]:
        """Readable scopes plus the personal scope, which is always readable."""
        scopes = list(self.readable_scope_ids)
        if self.personal_scope_id not in scopes:
            scopes.append(self.personal_scope_id)
        return tuple(scopes)


def make_proposal(
    *,
    principal_id: str,
    personal_scope_id: str,
    readable_scope_ids: list[str],
    subject: str,
    predicate: str,
    object_: str,
    evidence_text: str,
    context: TaskContext,
    target_scope_id: str = "",
    context_as_sent: TaskContext | None = None,
    location: ProposalLocation | None = None,
) -> Proposal:
    principal = parse_uuid("principal_id", principal_id)
    personal = parse_uuid("personal_scope_id", personal_scope_id)
    readable = parse_uuids("readable_scope_ids", readable_scope_ids)
    target = optional_uuid("target_scope_id", target_scope_id)
    if target is not None and (target == personal or target not in readable):
        raise InvalidInput("target_scope_id", "not a readable shared scope", reason="out_of_scope")
    subject = require_text("subject", subject, MAX_SUBJECT)
    predicate = require_text("predicate", predicate, MAX_PREDICATE)
    object_ = require_text("object", object_, MAX_OBJECT)
    evidence_text = bound_text("evidence_text", evidence_text, MAX_EVIDENCE).strip()
    return Proposal(
        principal_id=principal,
        personal_scope_id=personal,
        readable_scope_ids=tuple(dict.fromkeys(readable)),
        subject=subject,
        predicate=predicate,
        object=object_,
        evidence_text=evidence_text,
        context=context,
        fact_key=fact_key(personal, subject, predicate, object_),
        target_scope_id=target,
        context_as_sent=context_as_sent,
        location=location or ProposalLocation(),
    )


def refused_attempt(proposal: Proposal, field_name: str) -> Proposal:
    """The proposal a refused attempt records: its task context and location, except the
    field the refusal names (it carried the refused text, which is never stored)."""
    name = field_name.removeprefix("context.")
    if field_name.startswith("context.") and name in TaskContext.__dataclass_fields__:
        return dataclasses.replace(
            proposal, context=dataclasses.replace(proposal.context, **{name: ""})
        )
    if field_name in ProposalLocation.__dataclass_fields__:
        return dataclasses.replace(
            proposal, location=dataclasses.replace(proposal.location, **{field_name: ""})
        )
    return proposal


@dataclass(frozen=True)
class ProposalFindings:
    """What the store found before deciding, all read under the proposal's locks."""

    known_fact_key: str | None  # same normalized fact ACTIVE in a readable scope
    conflicting_fact_keys: tuple[str, ...]  # ACTIVE, same subject+predicate, other object
    pending_in_personal_scope: bool  # a current PROPOSED version of the key exists
    created_in_task: int  # CREATED attempts of this task identity so far


@dataclass(frozen=True)
class ProposalDecision:
    outcome: Outcome
    reason: str = ""
    fact_key: str = ""
    conflicting_fact_keys: tuple[str, ...] = ()


def decide_proposal(
    proposal: Proposal, findings: ProposalFindings, ontology: Ontology
) -> ProposalDecision:
    """Known shared truth, then single-valued conflicts, then dedup, then limits."""
    if findings.known_fact_key is not None:
        return ProposalDecision(Outcome.SKIPPED, "already_known", findings.known_fact_key)
    if ontology.is_single_valued(proposal.predicate) and findings.conflicting_fact_keys:
        return ProposalDecision(
            Outcome.CONFLICTED,
            "single_valued_conflict",
            proposal.fact_key,
            findings.conflicting_fact_keys,
        )
    if findings.pending_in_personal_scope:
        return ProposalDecision(Outcome.DEDUPLICATED, "already_proposed", proposal.fact_key)
    if findings.created_in_task >= TASK_PROPOSAL_LIMIT:
        return ProposalDecision(Outcome.REJECTED, "task_limit", proposal.fact_key)
    return ProposalDecision(Outcome.CREATED, "", proposal.fact_key)


@dataclass(frozen=True)
class ProposalResult:
    attempt_id: uuid.UUID
    decision: ProposalDecision
    fact: FactView | None


class RetractionStatus(StrEnum):
    RETRACTED = "retracted"
    ALREADY_RETRACTED = "already_retracted"


@dataclass(frozen=True)
class AttemptView:
    attempt_id: uuid.UUID
    seq: int
    outcome: Outcome
    reason: str
    fact_key: str
    subject: str
    predicate: str
    object: str
    fact_state: FactState | None
    context: TaskContext
    created_at: datetime
    # A verified proposal: the key of the fact it became. A conflicted attempt: the
    # active facts it contradicts (it created nothing).
    superseded_by: str = ""
    conflicting_fact_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProposalReport:
    attempts: tuple[AttemptView, ...]
    next_page_token: str
    outcome_counts: dict[str, int]
    state_counts: dict[str, int]
    total_attempts: int
