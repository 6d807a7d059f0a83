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
from vera.text import codepoint, first_hidden

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


def parse_uuid(field_name: str, value: str, *, required: bool = True) -> uuid.UUID | None:
    if not value:
        if required:
            raise InvalidInput(field_name, "required", reason="required")
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidInput(field_name, "not a uuid", reason="malformed") from None


def parse_uuids(field_name: str, values: list[str]) -> list[uuid.UUID]:
    out = []
    for i, value in enumerate(values):
        parsed = parse_uuid(f"{field_name}[{i}]", value)
        assert parsed is not None
        out.append(parsed)
    return out


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


def page_size(field_name: str, value: int, default: int, maximum: int) -> int:
    if value == 0:
        return default
    if value < 1 or value > maximum:
        raise InvalidInput(field_name, f"must be 1..{maximum}", reason="out_of_range")
    return value


# --- ingest -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceIn:
    source_id: str
    source_type: str = ""
    title: str = ""
    uri: str = ""
    observed_at: datetime | None = None


@dataclass(frozen=True)
class EntityIn:
    name: str
    name_key: str
    aliases: tuple[str, ...] = ()
    kind: str = ""


@dataclass(frozen=True)
class FactIn:
    subject: str
    predicate: str
    object: str
    fact_key: str
    source_id: str = ""
    evidence: str = ""
    locator: str = ""
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    trust_tier: int = CURATED_TRUST_TIER
    authority: float = CURATED_AUTHORITY
    repository: str = ""
    branch: str = ""
    code_path: str = ""
    document_type: str = ""

    @property
    def subject_norm(self) -> str:
        return normalize(self.subject)

    @property
    def predicate_norm(self) -> str:
        return normalize(self.predicate)

    @property
    def object_norm(self) -> str:
        return normalize(self.object)


@dataclass(frozen=True)
class IngestBatch:
    principal_id: uuid.UUID
    scope_id: uuid.UUID
    sources: tuple[SourceIn, ...]
    entities: tuple[EntityIn, ...]
    facts: tuple[FactIn, ...]

    def referenced_source_ids(self) -> set[str]:
        """Source ids the facts name that the batch itself does not carry."""
        own = {s.source_id for s in self.sources}
        return {f.source_id for f in self.facts if f.source_id and f.source_id not in own}


@dataclass(frozen=True)
class IngestWarning:
    """A record stored but flagged: ``field`` is its path in the request."""

    field: str
    reason: str
    codepoint: str


# Evidence is quoted prose: its line breaks and tabs are layout, not hidden text.
EVIDENCE_LAYOUT = "\n\r\t"


def ingest_warnings(batch: IngestBatch) -> tuple[IngestWarning, ...]:
    """Curated text holding hidden characters (``vera.text``). Curators publish what they
    mean, so ingest keeps it and flags it, unlike a proposal, which is refused; every
    rendering escapes it either way."""
    fields: list[tuple[str, str, str]] = []
    for i, s in enumerate(batch.sources):
        fields += [(f"sources[{i}].{n}", getattr(s, n), "") for n in ("source_id", "title")]
    for i, e in enumerate(batch.entities):
        fields.append((f"entities[{i}].name", e.name, ""))
        fields += [(f"entities[{i}].aliases[{j}]", a, "") for j, a in enumerate(e.aliases)]
    for i, f in enumerate(batch.facts):
        fields += [(f"facts[{i}].{n}", getattr(f, n), "") for n in ("subject", "predicate")]
        fields += [
            (f"facts[{i}].object", f.object, ""),
            (f"facts[{i}].evidence", f.evidence, EVIDENCE_LAYOUT),
            (f"facts[{i}].locator", f.locator, ""),
        ]
    warnings = []
    for name, value, allowed in fields:
        hidden = first_hidden(value, allowed)
        if hidden is not None:
            warnings.append(IngestWarning(name, "hidden_character", codepoint(hidden)))
    return tuple(warnings)


def validate_source(i: int, s: SourceIn) -> SourceIn:
    prefix = f"sources[{i}]"
    return SourceIn(
        source_id=require_text(f"{prefix}.source_id", s.source_id, MAX_TEXT),
        source_type=bound_text(f"{prefix}.source_type", s.source_type, MAX_TEXT).strip(),
        title=bound_text(f"{prefix}.title", s.title, MAX_TEXT),
        uri=bound_text(f"{prefix}.uri", s.uri, MAX_TEXT),
        observed_at=s.observed_at,
    )


def validate_entity(i: int, name: str, aliases: list[str], kind: str) -> EntityIn:
    prefix = f"entities[{i}]"
    name = require_text(f"{prefix}.name", name, MAX_SUBJECT)
    clean_aliases: list[str] = []
    for j, alias in enumerate(aliases):
        alias = bound_text(f"{prefix}.aliases[{j}]", alias, MAX_SUBJECT).strip()
        if alias and alias not in clean_aliases:
            clean_aliases.append(alias)
    return EntityIn(
        name=name,
        name_key=normalize(name),
        aliases=tuple(clean_aliases),
        kind=bound_text(f"{prefix}.kind", kind, MAX_TEXT).strip(),
    )


def validate_fact(
    i: int,
    scope_id: uuid.UUID,
    *,
    subject: str,
    predicate: str,
    object_: str,
    source_id: str,
    evidence: str,
    locator: str,
    valid_from: datetime | None,
    valid_to: datetime | None,
    trust_tier: int | None,
    authority: float | None,
    repository: str,
    branch: str,
    code_path: str,
    document_type: str,
) -> FactIn:
    prefix = f"facts[{i}]"
    subject = require_text(f"{prefix}.subject", subject, MAX_SUBJECT)
    predicate = require_text(f"{prefix}.predicate", predicate, MAX_PREDICATE)
    object_ = require_text(f"{prefix}.object", object_, MAX_OBJECT)
    tier = CURATED_TRUST_TIER if trust_tier is None else trust_tier
    if not 0 <= tier <= 4:
        raise InvalidInput(f"{prefix}.trust_tier", "must be 0..4", reason="out_of_range")
    auth = CURATED_AUTHORITY if authority is None else authority
    if not 0.0 <= auth <= 1.0:  # also rejects NaN
        raise InvalidInput(f"{prefix}.authority", "must be 0..1", reason="out_of_range")
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        raise InvalidInput(f"{prefix}.valid_to", "must be after valid_from", reason="out_of_range")
    return FactIn(
        subject=subject,
        predicate=predicate,
        object=object_,
        fact_key=fact_key(scope_id, subject, predicate, object_),
        source_id=bound_text(f"{prefix}.source_id", source_id, MAX_TEXT).strip(),
        evidence=bound_text(f"{prefix}.evidence", evidence, MAX_EVIDENCE),
        locator=bound_text(f"{prefix}.locator", locator, MAX_TEXT),
        valid_from=valid_from,
        valid_to=valid_to,
        trust_tier=tier,
        authority=auth,
        repository=_fact_repository(f"{prefix}.repository", repository),
        branch=bound_text(f"{prefix}.branch", branch, MAX_TEXT).strip(),
        code_path=bound_text(f"{prefix}.code_path", code_path, MAX_TEXT).strip(),
        document_type=bound_text(f"{prefix}.document_type", document_type, MAX_TEXT).strip(),
    )


def _fact_repository(field_name: str, value: str) -> str:
    value = bound_text(field_name, value, MAX_TEXT).strip()
    if not value:
        return ""
    canonical = canonical_repository(value)
    if not canonical:
        raise InvalidInput(field_name, "not a supported repository identity", reason="malformed")
    return canonical


def check_batch(batch: IngestBatch, known_source_ids: set[str]) -> None:
    """Whole-batch checks that need the scope's existing sources; raises on the first."""
    if len(batch.sources) + len(batch.entities) + len(batch.facts) > MAX_BATCH:
        raise InvalidInput("facts", f"at most {MAX_BATCH} records per batch", reason="too_many")
    own = {s.source_id for s in batch.sources}
    for i, f in enumerate(batch.facts):
        if f.source_id and f.source_id not in own and f.source_id not in known_source_ids:
            raise InvalidInput(f"facts[{i}].source_id", "unknown source", reason="not_found")


@dataclass
class Counts:
    created: int = 0
    deduplicated: int = 0


@dataclass
class IngestResult:
    sources: Counts = field(default_factory=Counts)
    entities: Counts = field(default_factory=Counts)
    facts: Counts = field(default_factory=Counts)
    change_position: int = 0


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


def source_stale(observed_at: datetime | None, now: datetime, stale_after_days: int) -> bool:
    """The one staleness rule: observed longer ago than the threshold. A source never
    observed is not stale (staleness needs an observation time)."""
    return observed_at is not None and now - observed_at > timedelta(days=stale_after_days)


def citation_of(assertion: AssertionView, now: datetime, stale_after_days: int) -> CitationView:
    first = assertion.evidence[0] if assertion.evidence else None
    source = assertion.source
    observed_at = source.observed_at if source else None
    return CitationView(
        source_id=source.source_id if source else "",
        locator=first.locator if first else "",
        title=source.title if source else "",
        uri=source.uri if source else "",
        excerpt=excerpt(first.text) if first else "",
        verification=assertion.verification,
        source_type=source.source_type if source else "",
        observed_at=observed_at,
        stale=source_stale(observed_at, now, stale_after_days),
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


# --- proposals --------------------------------------------------------------------------


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
    location: ProposalLocation = ProposalLocation()

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
    location: ProposalLocation = ProposalLocation(),
) -> Proposal:
    principal = parse_uuid("principal_id", principal_id)
    personal = parse_uuid("personal_scope_id", personal_scope_id)
    readable = parse_uuids("readable_scope_ids", readable_scope_ids)
    assert principal is not None and personal is not None
    target = parse_uuid("target_scope_id", target_scope_id, required=False)
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
        location=location,
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


# --- feedback and changes ---------------------------------------------------------------


@dataclass(frozen=True)
class FeedbackIn:
    principal_id: uuid.UUID
    scope_id: uuid.UUID
    pack_id: str
    result_ref: str
    signal: str
    query: str
    rank: int
    signal_vector: dict[str, float]
    fact_key: str
    attribution: str = FEEDBACK_UNATTRIBUTED
    pack_scope_id: uuid.UUID | None = None


def make_feedback(
    *,
    principal_id: str,
    personal_scope_id: str,
    pack_id: str,
    result_ref: str,
    signal: str,
    query: str,
    rank: int,
    signal_vector: dict[str, float],
    fact_key: str,
    attribution: str = FEEDBACK_UNATTRIBUTED,
    pack_scope_id: str = "",
) -> FeedbackIn:
    """A client's claim about what it saw never becomes training data: the signal vector
    is kept only for a RESULT row (the gateway copied it from the stored pack); any other
    attribution stores none, whatever was sent."""
    principal = parse_uuid("principal_id", principal_id)
    scope = parse_uuid("personal_scope_id", personal_scope_id)
    assert principal is not None and scope is not None
    if signal not in FEEDBACK_SIGNALS:
        raise InvalidInput("signal", "must be up or down", reason="out_of_range")
    if rank < 0:
        raise InvalidInput("rank", "must be >= 0", reason="out_of_range")
    pack = require_text("pack_id", pack_id, MAX_ID)
    result = require_text("result_ref", result_ref, MAX_ID)
    pack_scope = None
    if attribution == FEEDBACK_RESULT:
        if result == pack or rank < 1:
            raise InvalidInput(
                "attribution", "a result row names one ranked result", reason="invalid"
            )
        pack_scope = parse_uuid("pack_scope_id", pack_scope_id)
    elif attribution == FEEDBACK_PACK:
        if result != pack:
            raise InvalidInput(
                "attribution", "a pack row names the pack as its result", reason="invalid"
            )
        pack_scope = parse_uuid("pack_scope_id", pack_scope_id, required=False)
    elif attribution != FEEDBACK_UNATTRIBUTED:
        raise InvalidInput("attribution", reason="out_of_range")
    return FeedbackIn(
        principal_id=principal,
        scope_id=scope,
        pack_id=pack,
        result_ref=result,
        signal=signal,
        query=bound_text("query", query, MAX_QUERY),
        rank=rank,
        signal_vector=dict(signal_vector) if attribution == FEEDBACK_RESULT else {},
        fact_key=bound_text("fact_key", fact_key, MAX_ID).strip(),
        attribution=attribution,
        pack_scope_id=pack_scope,
    )


@dataclass(frozen=True)
class RankingFeedbackRow:
    """One training row: the query's digest groups one question; its text, the fact and
    the pack's scope let retrieval replay the question to judge a model."""

    feedback_id: uuid.UUID
    pack_id: str
    query_digest: str
    rank: int
    signal: str
    signal_vector: dict[str, float]
    recorded_at: datetime
    seq: int
    query: str = ""
    fact_key: str = ""
    pack_scope_id: uuid.UUID | None = None


@dataclass(frozen=True)
class FeedbackView:
    feedback_id: uuid.UUID
    signal: str
    created: bool
    recorded_at: datetime


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
