"""Curation rules: how a human curator reviews proposals and retracts sources.

Curators act through the REST API, never through MCP; the API authorizes them against
identity (project owner, or a workspace owner/curator) before calling. These rules
validate what a curator sends and decide what a decision writes. Pure code: no gRPC, no
asyncpg.

- A proposal is addressed to the shared projects its proposer could read when proposing
  (never the personal scope); curators of any of them may review it, once.
- verify: the fact becomes ACTIVE shared truth in the project with a new assertion at a
  human tier (0..3; 4 stays reserved for unverified agent text), attributed to the
  curator. The personal proposal is closed as SUPERSEDED by the shared fact's key.
- two-person verification (a project's setting, off by default and for every project
  made before it existed, switched by the project's owner): verifying a proposal is
  refused to the principal that proposed it (an agent acting as them included), with
  ``unauthorized``, reason ``two_person_verification``. A curator's own direct curation
  (ingest, corrections, a published harvest) is not a proposal and stays possible; its
  change-log entries carry the curator as actor.
- reject: the personal proposal is closed as RETRACTED; the reason is kept.
- conflicted attempts: a proposal contradicting an active fact on a single-valued
  predicate is refused (``conflicted``) and creates no proposal, but the curators of the
  project owning the contradicted fact see the attempt with that fact's key, newest
  first: a proposed correction ("the database is now PostgreSQL 16") a human can act on
  with a ``correction`` line of ``vera ingest``.
- retract a source: its assertions are withdrawn; a fact left without any supporting
  assertion is retracted; the action is written to audit_events.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from vera.errors import InvalidInput, Unauthorized
from vera.request_fields import parse_uuid

from .domain import (
    CURATED_AUTHORITY,
    CURATED_TRUST_TIER,
    MAX_TEXT,
    FactView,
    ProposalLocation,
    TaskContext,
    Total,
    require_text,
)
from .proposals import Proposal

HUMAN_TIERS = range(0, 4)
PENDING_PAGE_DEFAULT, PENDING_PAGE_MAX = 50, 100
MAX_REASON = 2048
AUDIT_SOURCE_RETRACTED = "source_retracted"
# A curator's decision on a proposal, in the audit trail (vera.db.audit).
AUDIT_PROPOSAL_VERIFIED = "proposal.verified"
AUDIT_PROPOSAL_REJECTED = "proposal.rejected"


def proposal_targets(proposal: Proposal) -> tuple[uuid.UUID, ...]:
    """The shared project a new proposal is addressed to: only the one its task is bound
    to, never every project its proposer reads (a workspace can be joined without the
    proposer meaning to report to it)."""
    return () if proposal.target_scope_id is None else (proposal.target_scope_id,)


def review_locator(fact_key: str) -> str:
    """Locator of evidence carried over from a proposal into the curator's assertion."""
    return f"proposal:{fact_key}"


@dataclass(frozen=True)
class VerifyIn:
    curator_id: uuid.UUID
    scope_id: uuid.UUID
    fact_key: str
    trust_tier: int
    authority: float
    note: str


@dataclass(frozen=True)
class RejectIn:
    curator_id: uuid.UUID
    scope_id: uuid.UUID
    fact_key: str
    reason: str


@dataclass(frozen=True)
class RetractSourceIn:
    curator_id: uuid.UUID
    scope_id: uuid.UUID
    source_id: str
    reason: str
    validate_only: bool = False


def _ids(curator_id: str, scope_id: str) -> tuple[uuid.UUID, uuid.UUID]:
    curator = parse_uuid("curator_principal_id", curator_id)
    scope = parse_uuid("scope_id", scope_id)
    return curator, scope


def make_verify(
    *,
    curator_id: str,
    scope_id: str,
    fact_key: str,
    trust_tier: int | None,
    authority: float | None,
    note: str,
) -> VerifyIn:
    curator, scope = _ids(curator_id, scope_id)
    tier = CURATED_TRUST_TIER if trust_tier is None else trust_tier
    if tier not in HUMAN_TIERS:
        raise InvalidInput("trust_tier", "a human tier is 0..3", reason="out_of_range")
    auth = CURATED_AUTHORITY if authority is None else authority
    if not 0.0 <= auth <= 1.0:  # also rejects NaN
        raise InvalidInput("authority", "must be 0..1", reason="out_of_range")
    if len(note) > MAX_REASON:
        raise InvalidInput("note", "too long", reason="too_long")
    return VerifyIn(
        curator, scope, require_text("fact_key", fact_key, MAX_TEXT), tier, auth, note.strip()
    )


def make_reject(*, curator_id: str, scope_id: str, fact_key: str, reason: str) -> RejectIn:
    curator, scope = _ids(curator_id, scope_id)
    return RejectIn(
        curator,
        scope,
        require_text("fact_key", fact_key, MAX_TEXT),
        require_text("reason", reason, MAX_REASON),
    )


def make_retract_source(
    *, curator_id: str, scope_id: str, source_id: str, reason: str, validate_only: bool = False
) -> RetractSourceIn:
    """A preview (``validate_only``) writes nothing, so it needs no reason yet."""
    curator, scope = _ids(curator_id, scope_id)
    return RetractSourceIn(
        curator,
        scope,
        require_text("source_id", source_id, MAX_TEXT),
        reason if validate_only else require_text("reason", reason, MAX_REASON),
        validate_only,
    )


@dataclass(frozen=True)
class PendingSource:
    source_id: str
    locator: str
    uri: str
    observed_at: datetime | None


@dataclass(frozen=True)
class PendingView:
    fact_key: str
    version_id: uuid.UUID
    proposer_id: uuid.UUID | None
    subject: str
    predicate: str
    object: str
    evidence: tuple[str, ...]
    context: TaskContext
    proposed_at: datetime
    conflicting_fact_keys: tuple[str, ...]
    known_fact_key: str
    location: ProposalLocation
    # The cited source, for a proposal that has one (a harvest's file): what bulk review
    # groups by.
    source: PendingSource | None = None
    repository: str = ""


@dataclass(frozen=True)
class PendingPage:
    proposals: tuple[PendingView, ...]
    next_page_token: str
    total: Total


@dataclass(frozen=True)
class ConflictedView:
    """An attempt refused as conflicted, seen by the curators of the project whose
    facts (``contradicted_fact_keys``) it contradicts."""

    attempt_id: uuid.UUID
    seq: int
    proposer_id: uuid.UUID
    subject: str
    predicate: str
    object: str
    contradicted_fact_keys: tuple[str, ...]
    context: TaskContext
    attempted_at: datetime
    location: ProposalLocation


@dataclass(frozen=True)
class ConflictedPage:
    attempts: tuple[ConflictedView, ...]
    next_page_token: str
    total: Total


@dataclass(frozen=True)
class VerifyResult:
    fact: FactView
    proposal: FactView
    already_active: bool
    change_position: int


@dataclass(frozen=True)
class RejectResult:
    proposal: FactView
    change_position: int


@dataclass(frozen=True)
class SourceRow:
    """A project's source as its curators review it; freshness is computed by the caller
    (``graph.freshness``, the one rule)."""

    source_id: str
    source_type: str
    title: str
    uri: str
    observed_at: datetime | None
    cited_by_facts: int
    retracted_at: datetime | None


@dataclass(frozen=True)
class SourcePage:
    sources: tuple[SourceRow, ...]
    next_page_token: str
    total: Total


@dataclass(frozen=True)
class RetractSourceResult:
    already_retracted: bool
    assertions_withdrawn: int
    retracted_fact_keys: tuple[str, ...]
    still_supported_fact_keys: tuple[str, ...]
    audit_event_id: uuid.UUID | None
    change_position: int


@dataclass(frozen=True)
class CurationSettings:
    """A shared project's curation settings; a project that never set them has these."""

    two_person_verification: bool = False


TWO_PERSON_VERIFICATION = "two_person_verification"


def check_verifier(settings: CurationSettings, proposer_id: uuid.UUID | None,
                   curator_id: uuid.UUID) -> None:
    """Four eyes: under two-person verification the proposer may not verify their own."""
    if settings.two_person_verification and proposer_id == curator_id:
        raise Unauthorized("a proposal is verified by someone other than its proposer",
                           reason=TWO_PERSON_VERIFICATION)


def not_pending() -> InvalidInput:
    """The one error for a proposal that is unknown, not addressed here, or decided."""
    return InvalidInput("fact_key", "no pending proposal for this project", reason="not_found")
