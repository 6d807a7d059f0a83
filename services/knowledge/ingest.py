"""Rules of a curated ingest batch: its input records, their validation and
warnings, and what a load reports.

Pure code: no gRPC, no asyncpg.
"""


import uuid
from dataclasses import dataclass, field
from datetime import datetime

from vera.errors import InvalidInput
from vera.text import codepoint, first_hidden

from .domain import (
    CURATED_AUTHORITY,
    CURATED_TRUST_TIER,
    MAX_BATCH,
    MAX_EVIDENCE,
    MAX_OBJECT,
    MAX_PREDICATE,
    MAX_SUBJECT,
    MAX_TEXT,
    bound_text,
    canonical_repository,
    fact_key,
    normalize,
    require_text,
)


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
