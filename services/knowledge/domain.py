"""Knowledge rules: normalization, fact keys, validation, proposal policy, task identity.

Pure code: no gRPC, no asyncpg. The API layer turns requests into the input dataclasses
here; the store persists what these rules decide.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from importlib import resources
from pathlib import Path

from vera import limits
from vera.config import ConfigError
from vera.errors import InvalidInput
from vera.repository_identity import canonicalize, relative_code_path

# Curated facts default to a good-but-not-best tier; proposals are always unverified.
CURATED_TRUST_TIER = 1
CURATED_AUTHORITY = 0.7
PROPOSAL_TRUST_TIER = 4
PROPOSAL_AUTHORITY = 0.1
TASK_PROPOSAL_LIMIT = 50
EXCERPT_CHARS = 500

# Bounds on what a tool carries are the published contract (vera.limits); a curated fact
# meets the same ones as a proposed fact.
MAX_SUBJECT = limits.SUBJECT[1]
MAX_PREDICATE = limits.PREDICATE_OBJECT[1]
MAX_OBJECT = limits.PREDICATE_OBJECT[1]
MAX_EVIDENCE = limits.EVIDENCE_TEXT[1]
MAX_ENTITY = limits.ENTITY[1]
MAX_CONTEXT_FIELD = limits.TASK_CONTEXT_FIELD[1]
MAX_ID = limits.ID_LIKE[1]
MAX_BRANCH = limits.ID_LIKE[1]
MAX_CODE_PATH = limits.REPOSITORY_PATH_CURSOR[1]
MAX_QUERY = limits.QUERY[1]
MAX_TEXT = 2048  # titles, uris, locators, bindings of curated records
MAX_BATCH = 10_000

REPORT_PAGE_DEFAULT, REPORT_PAGE_MAX = 50, limits.LIMIT_REPORT[1]
CHANGES_PAGE_DEFAULT, CHANGES_PAGE_MAX = 256, 1000
CHANGES_MAX_WAIT_SECONDS = 10.0

FEEDBACK_SIGNALS = ("up", "down")
# Where a feedback row's query, rank and signal vector came from; only RESULT rows carry a
# signal vector, so only they are ranking training data (see ListRankingFeedback).
FEEDBACK_RESULT, FEEDBACK_PACK, FEEDBACK_UNATTRIBUTED = "result", "pack", "unattributed"
RANKING_FEEDBACK_PAGE_DEFAULT, RANKING_FEEDBACK_PAGE_MAX = 500, 1000

_WHITESPACE = re.compile(r"\s+")


class FactState(StrEnum):
    PROPOSED = "PROPOSED"
    ACTIVE = "ACTIVE"
    DISPUTED = "DISPUTED"  # derived on read, never stored
    RETRACTED = "RETRACTED"
    SUPERSEDED = "SUPERSEDED"


LIVE_STATES = (FactState.PROPOSED.value, FactState.ACTIVE.value)


class Outcome(StrEnum):
    CREATED = "created"
    DEDUPLICATED = "deduplicated"
    SKIPPED = "skipped"
    CONFLICTED = "conflicted"
    REJECTED = "rejected"


class Verification(StrEnum):
    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    WITHDRAWN = "withdrawn"


# --- normalization and keys -------------------------------------------------------------


def normalize(text: str) -> str:
    """NFKC, casefold, whitespace collapsed and stripped: the form facts are keyed on."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def fact_key(scope_id: uuid.UUID | str, subject: str, predicate: str, object_: str) -> str:
    """Stable key of (scope, subject, predicate, object) across versions."""
    material = "\x1f".join(
        (str(scope_id), normalize(subject), normalize(predicate), normalize(object_))
    )
    return "fk_" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True)
class Ontology:
    version: str
    single_valued_predicates: frozenset[str]
    # The proposal allowlist of the same file (``policy.policy_for`` adds the single-valued
    # predicates), so an operator's ontology changes conflicts and the allowlist together.
    proposal_predicates: frozenset[str] = frozenset()

    def is_single_valued(self, predicate: str) -> bool:
        return normalize(predicate) in self.single_valued_predicates


ONTOLOGY_PATH_VARIABLE = "VERA_KNOWLEDGE__ONTOLOGY_PATH"


@lru_cache(maxsize=4)
def load_ontology(path: Path | None = None) -> Ontology:
    """The shipped ontology, or the operator's file (``VERA_KNOWLEDGE__ONTOLOGY_PATH``).

    The file is JSON: ``{"version": "...", "single_valued_predicates": [...]}``. Its version
    is reported with conflicts (and pinned by snapshots), so an operator who changes the
    predicates changes the version too.
    """
    try:
        if path is None:
            text = (resources.files(__package__) / "ontology.json").read_text(encoding="utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        raw = json.loads(text)
        version = raw["version"]
        predicates = raw["single_valued_predicates"]
        if not isinstance(version, str) or not version.strip():
            raise ValueError("version must be a non-empty string")
        if not isinstance(predicates, list) or not all(isinstance(p, str) for p in predicates):
            raise ValueError("single_valued_predicates must be a list of strings")
        allowed = raw.get("proposal_predicates", [])
        if not isinstance(allowed, list) or not all(isinstance(p, str) for p in allowed):
            raise ValueError("proposal_predicates must be a list of strings")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{ONTOLOGY_PATH_VARIABLE}: unreadable ontology ({exc})") from None
    return Ontology(
        version=version.strip(),
        single_valued_predicates=frozenset(normalize(p) for p in predicates),
        proposal_predicates=frozenset(normalize(p) for p in allowed),
    )


def excerpt(text: str) -> str:
    return text[:EXCERPT_CHARS]


# --- task identity ----------------------------------------------------------------------


def canonical_repository(ref: str) -> str:
    """The canonical ``host/path`` identity of a repository reference, or "".

    Credentials, query, fragment, port and ``.git`` are dropped; local paths and anything
    else that names no remote host become "" so they are never stored.
    """
    return canonicalize(unicodedata.normalize("NFKC", ref)) or ""


@dataclass(frozen=True)
class TaskContext:
    runtime: str = ""
    session_ref: str = ""
    task_ref: str = ""
    repository_ref: str = ""

    @classmethod
    def normalized(
        cls, runtime: str, session_ref: str, task_ref: str, repository_ref: str
    ) -> TaskContext:
        for name, value in (
            ("runtime", runtime),
            ("session_ref", session_ref),
            ("task_ref", task_ref),
            ("repository_ref", repository_ref),
        ):
            if len(value) > MAX_CONTEXT_FIELD:
                raise InvalidInput(f"context.{name}", "too long", reason="too_long")
        return cls(
            runtime=normalize(runtime),
            session_ref=_collapse(session_ref),
            task_ref=_collapse(task_ref),
            repository_ref=canonical_repository(repository_ref),
        )

    def is_empty(self) -> bool:
        return not (self.runtime or self.session_ref or self.task_ref or self.repository_ref)

    def identity(self) -> str:
        """Every supplied field takes part; an unsupplied one is absent, not a wildcard."""
        return json.dumps(
            [self.runtime, self.session_ref, self.task_ref, self.repository_ref],
            ensure_ascii=False,
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class ProposalLocation:
    """Where the proposer was working, shown to reviewers; unlike ``TaskContext`` it takes
    no part in the task identity (a branch switch is still the same task)."""

    branch: str = ""
    code_path: str = ""

    @classmethod
    def normalized(cls, branch: str, code_path: str) -> ProposalLocation:
        if len(branch) > MAX_BRANCH:
            raise InvalidInput("branch", "too long", reason="too_long")
        if len(code_path) > MAX_CODE_PATH:
            raise InvalidInput("code_path", "too long", reason="too_long")
        # A local path names the proposer's machine, not the repository: never stored.
        return cls(branch=_collapse(branch), code_path=relative_code_path(code_path) or "")


def _collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()


# --- validation helpers -----------------------------------------------------------------


def require_text(field_name: str, value: str, max_len: int) -> str:
    if not value.strip():
        raise InvalidInput(field_name, "required", reason="required")
    if len(value) > max_len:
        raise InvalidInput(field_name, "too long", reason="too_long")
    return value.strip()


def bound_text(field_name: str, value: str, max_len: int) -> str:
    if len(value) > max_len:
        raise InvalidInput(field_name, "too long", reason="too_long")
    return value


# --- read models ------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceView:
    source_id: str
    source_type: str
    title: str
    uri: str
    observed_at: datetime | None


@dataclass(frozen=True)
class EvidenceView:
    evidence_id: uuid.UUID
    text: str
    locator: str


@dataclass(frozen=True)
class AssertionView:
    assertion_id: uuid.UUID
    supports: bool
    trust_tier: int
    authority: float
    verification: Verification
    source: SourceView | None
    evidence: tuple[EvidenceView, ...]
    recorded_at: datetime
    # lines_changed / lines_vanished: the cited lines drifted (vera harvest); "" when not.
    drift_reason: str = ""


@dataclass(frozen=True)
class CitationView:
    source_id: str
    locator: str
    title: str
    uri: str
    excerpt: str
    verification: Verification
    source_type: str
    observed_at: datetime | None
    stale: bool = False
    stale_reason: str = ""


@dataclass(frozen=True)
class Total:
    """How many rows a read matched, counted up to a limit: ``lower_bound`` when more
    matched than were counted (``count`` is then "at least")."""

    count: int
    lower_bound: bool


@dataclass(frozen=True)
class FactView:
    fact_key: str
    version_id: uuid.UUID
    scope_id: uuid.UUID
    subject: str
    predicate: str
    object: str
    state: FactState
    trust_tier: int
    authority: float
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    repository: str
    branch: str
    code_path: str
    document_type: str
    source_type: str
    citations: tuple[CitationView, ...] = ()
    conflicting_fact_keys: tuple[str, ...] = ()
    # Corrections: the key that replaced this fact / the key this version corrected.
    superseded_by: str = ""
    corrects: str = ""


def verification_of(status: str) -> Verification:
    if status == "verified":
        return Verification.VERIFIED
    if status == "withdrawn":
        return Verification.WITHDRAWN
    return Verification.UNVERIFIED


def displayed_state(stored_state: str, conflicting_fact_keys: tuple[str, ...]) -> FactState:
    """ACTIVE facts contradicted on a single-valued predicate read as DISPUTED."""
    state = FactState(stored_state)
    if state is FactState.ACTIVE and conflicting_fact_keys:
        return FactState.DISPUTED
    return state


def answer_after_replacement(view: FactView) -> FactView | None:
    """What a read by key answers, without ``as_of``, when no version of the key is valid
    now: its last version if a correction replaced it, shown SUPERSEDED with
    ``superseded_by`` naming the replacement, so an old key leads to the new one; None for
    a fact that merely stopped being valid (nothing replaced it)."""
    if not view.superseded_by:
        return None
    return dataclasses.replace(view, state=FactState.SUPERSEDED)


SOURCE_STALE = "source_stale"


def source_stale(observed_at: datetime | None, now: datetime, stale_after_days: int) -> bool:
    """The one staleness rule: observed longer ago than the threshold. A source never
    observed is not stale (staleness needs an observation time)."""
    return observed_at is not None and now - observed_at > timedelta(days=stale_after_days)


def citation_of(assertion: AssertionView, now: datetime, stale_after_days: int) -> CitationView:
    first = assertion.evidence[0] if assertion.evidence else None
    source = assertion.source
    observed_at = source.observed_at if source else None
    aged = source_stale(observed_at, now, stale_after_days)
    return CitationView(
        source_id=source.source_id if source else "",
        locator=first.locator if first else "",
        title=source.title if source else "",
        uri=source.uri if source else "",
        excerpt=excerpt(first.text) if first else "",
        verification=assertion.verification,
        source_type=source.source_type if source else "",
        observed_at=observed_at,
        stale=aged or bool(assertion.drift_reason),
        # Drifted lines say more than age: the cited text itself is no longer there.
        stale_reason=assertion.drift_reason or (SOURCE_STALE if aged else ""),
    )


def best_first(assertions: list[AssertionView]) -> list[AssertionView]:
    """Best trust tier first, then higher authority, then oldest, then by source id."""
    return sorted(
        assertions,
        key=lambda a: (
            a.trust_tier,
            -a.authority,
            a.recorded_at,
            a.source.source_id if a.source else "",
            str(a.assertion_id),
        ),
    )


class ChangeKind(StrEnum):
    FACT_UPSERTED = "fact_upserted"
    SOURCE_UPSERTED = "source_upserted"
    FEEDBACK_RECORDED = "feedback_recorded"
    FACT_ERASED = "fact_erased"


@dataclass(frozen=True)
class ChangeView:
    position: int
    kind: ChangeKind
    fact: FactView | None
    created_at: datetime
    erased_version_id: str = ""  # FACT_ERASED: the deleted version (erasure.py)


@dataclass(frozen=True)
class ChangesPage:
    changes: tuple[ChangeView, ...]
    head_position: int


# --- the views the stores return -------------------------------------------------------


@dataclass(frozen=True)
class FactVersionView:
    version_id: uuid.UUID
    state: FactState
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    superseded_by: str
    corrects: str
    correction_reason: str


@dataclass(frozen=True)
class Edge:
    fact: FactView
    hop: int
    from_node: str
    to_node: str


@dataclass(frozen=True)
class ConflictGroupView:
    scope_id: uuid.UUID
    subject: str
    predicate: str
    facts: tuple[FactView, ...]


@dataclass(frozen=True)
class ScopeChangeView:
    position: int
    change: str
    scope_id: uuid.UUID
    fact: FactView | None
    source_id: str
    created_at: datetime
    actor_id: uuid.UUID | None = None  # whose action wrote it; None before actors were kept


@dataclass(frozen=True)
class RunView:
    run_id: uuid.UUID
    scope_id: uuid.UUID
    change_position: int
    algorithm: str
    seed: int
    summarizer: str
    fact_count: int
    entity_count: int
    created_at: datetime


@dataclass(frozen=True)
class CommunityView:
    community_id: uuid.UUID
    scope_id: uuid.UUID
    label: str
    summary: str
    entities: tuple[str, ...]
    run: RunView
    fact_count: int
    score: float = 0.0


@dataclass(frozen=True)
class CitedLinesRow:
    fact_key: str
    source_id: str
    locator: str
    evidence: str
    subject: str
    predicate: str
    object: str
    drift_reason: str
    drift_commit: str
    drift_detected_at: datetime | None


@dataclass(frozen=True)
class DriftMark:
    fact_key: str
    source_id: str
    reason: str  # one of DRIFT_REASONS, or "" to clear


@dataclass
class BulkResult:
    fact_keys: list[str] = field(default_factory=list)
    created: int = 0
    deduplicated: int = 0
    change_position: int = 0
