"""Domain types of the retrieval service: facts as read from knowledge, index rows, results.

Plain dataclasses so the pipeline and the indexer import no gRPC, driver or model code;
``convert`` maps them to and from the contracts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class FactState(enum.IntEnum):
    """Mirrors vera.knowledge.v1.FactState (the index stores these numbers)."""

    UNSPECIFIED = 0
    PROPOSED = 1
    ACTIVE = 2
    DISPUTED = 3
    RETRACTED = 4
    SUPERSEDED = 5


# States a current ("known now") read may return.
LIVE_STATES: tuple[FactState, ...] = (FactState.PROPOSED, FactState.ACTIVE, FactState.DISPUTED)
# A transaction-time read may land on versions that are superseded or retracted today;
# the time filters and the authoritative re-read decide.
TIME_TRAVEL_STATES: tuple[FactState, ...] = (
    *LIVE_STATES,
    FactState.SUPERSEDED,
    FactState.RETRACTED,
)


class ChangeKind(enum.IntEnum):
    """Mirrors vera.knowledge.v1.ChangeKind."""

    UNSPECIFIED = 0
    FACT_UPSERTED = 1
    SOURCE_UPSERTED = 2
    FEEDBACK_RECORDED = 3
    FACT_ERASED = 4


class RetrievalMode(enum.StrEnum):
    """Which index legs answered: the dense leg is an accelerator over the lexical one, and
    when it fails the lexical leg answers alone (degraded, and the answer says so)."""

    HYBRID = "hybrid"
    LEXICAL_ONLY = "lexical_only"


class ConflictHandling(enum.StrEnum):
    INCLUDE = "include"
    EXCLUDE = "exclude"
    ONLY = "only"


@dataclass(frozen=True)
class Citation:
    source_id: str = ""
    locator: str = ""
    title: str = ""
    uri: str = ""
    excerpt: str = ""
    verification: int = 0
    source_type: str = ""
    observed_at: datetime | None = None
    stale: bool = False  # knowledge's mark: observed longer ago than its threshold
    stale_reason: str = ""  # source_stale, or lines_changed / lines_vanished (drift)


@dataclass(frozen=True)
class Fact:
    fact_key: str
    version_id: str
    scope_id: str
    subject: str
    predicate: str
    object: str
    state: FactState = FactState.ACTIVE
    trust_tier: int = 0
    authority: float = 0.0
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    recorded_at: datetime | None = None
    superseded_at: datetime | None = None
    repository: str = ""
    branch: str = ""
    code_path: str = ""
    document_type: str = ""
    source_type: str = ""
    citations: tuple[Citation, ...] = ()
    conflicting_fact_keys: tuple[str, ...] = ()

    @property
    def disputed(self) -> bool:
        return self.state == FactState.DISPUTED or bool(self.conflicting_fact_keys)


@dataclass(frozen=True)
class Change:
    position: int
    kind: ChangeKind
    fact: Fact | None = None
    erased_version_id: str = ""  # FACT_ERASED: delete this version from every index


@dataclass(frozen=True)
class ChangePage:
    changes: list[Change]
    head_position: int


@dataclass(frozen=True)
class IndexQuery:
    """What both index legs filter on. ``as_of`` is always concrete (now when unset);
    ``known_as_of`` None means "current knowledge" (live states, no transaction-time
    bounds, so clock skew between services cannot hide a fresh fact)."""

    scope_ids: tuple[str, ...]
    as_of: datetime
    known_as_of: datetime | None = None
    document_type: str = ""
    source_type: str = ""
    include_predicates: tuple[str, ...] = ()
    exclude_predicates: tuple[str, ...] = ()
    min_authority: float | None = None
    max_trust_tier: int | None = None

    @property
    def states(self) -> tuple[FactState, ...]:
        return LIVE_STATES if self.known_as_of is None else TIME_TRAVEL_STATES

    @property
    def has_attribute_filters(self) -> bool:
        return bool(
            self.document_type
            or self.source_type
            or self.include_predicates
            or self.exclude_predicates
            or self.min_authority is not None
            or self.max_trust_tier is not None
        )


@dataclass(frozen=True)
class Candidate:
    """One hit of an index leg; ``score`` is the leg's raw score."""

    fact_key: str
    version_id: str
    score: float


@dataclass(frozen=True)
class CandidateFeatures:
    """Per-version signals beyond the two legs' own scores (see ports.SearchIndex.features)."""

    dense: float
    dense_context: float = 0.0
    subject_mentioned: bool = False


@dataclass(frozen=True)
class Filters:
    as_of: datetime | None = None
    known_as_of: datetime | None = None
    repository: str = ""
    branch: str = ""
    code_path: str = ""
    document_type: str = ""
    source_type: str = ""
    include_predicates: tuple[str, ...] = ()
    exclude_predicates: tuple[str, ...] = ()
    min_authority: float | None = None
    max_trust_tier: int | None = None
    conflict_handling: ConflictHandling = ConflictHandling.INCLUDE


@dataclass(frozen=True)
class Result:
    fact: Fact
    score: float
    position: int  # 1-based, in the answer (the wire's ``rank``)
    result_ref: str
    signals: dict[str, float]


@dataclass(frozen=True)
class Conflict:
    subject: str
    predicate: str
    fact_keys: tuple[str, ...]


@dataclass(frozen=True)
class FreshnessWarning:
    fact_key: str
    source_id: str
    reason: str
    observed_at: datetime | None


@dataclass(frozen=True)
class Omission:
    fact_key: str
    reason: str


@dataclass
class SearchOutcome:
    results: list[Result] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    freshness_warnings: list[FreshnessWarning] = field(default_factory=list)
    omitted: list[Omission] = field(default_factory=list)
    empty_reason: str = ""
    assembler_version: str = ""
    retrieval_mode: RetrievalMode = RetrievalMode.HYBRID


@dataclass
class ContextOutcome(SearchOutcome):
    token_estimate: int = 0


@dataclass(frozen=True)
class IndexStatus:
    indexed_position: int
    head_position: int
    indexed_facts: int
