"""The curated record format `vera ingest` loads: one JSON object per record, a
``source``, ``entity``, ``fact`` or ``correction`` (its ``type``), declared once as the
models below and validated whole into knowledge's inputs.

One home for the format: the CLI checks a file with it before sending anything (so a bad
line is reported with its number and nothing is written), and the REST API's ingest route
declares its ``records`` with the same models, so the API validates every request again
(it trusts no client) and its OpenAPI document describes the format. The bounds are the
published ones (``vera.limits``) that knowledge enforces on the same fields, so a record is
refused here, naming its field, for what the service would refuse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from vera import fields, limits
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.repository_identity import canonicalize
from vera.rpc.timestamps import to_timestamp

FACTS_PER_CALL = 500
MAX_REPORTED_ERRORS = 20


def _parse_time(value: str) -> datetime:
    """ISO-8601; without a zone, UTC."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _timestamp(value: str) -> str:
    try:
        to_timestamp(_parse_time(value))
    except (ValueError, InvalidInput):
        raise PydanticCustomError("malformed", "not an ISO-8601 timestamp") from None
    return value


def _text(most: int, least: int = 0) -> Any:
    return Field(min_length=least, max_length=most)


SourceId = Annotated[str, Field(min_length=limits.SOURCE_ID[0], max_length=limits.SOURCE_ID[1],
                                pattern=limits.SOURCE_ID_PATTERN)]
OptionalText = str | None
TimeText = Annotated[str, Field(max_length=limits.TIMESTAMP[1]), AfterValidator(_timestamp)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SourceRecord(_Record):
    """A source the project's facts cite (an ADR, a runbook, a file): ``id`` is the
    curator's, unique in the project."""

    type: Literal["source"]
    id: SourceId
    source_type: Annotated[OptionalText, _text(limits.TYPE_NAME[1])] = None
    title: Annotated[OptionalText, _text(1024)] = None
    uri: Annotated[OptionalText, _text(2048)] = None
    observed_at: TimeText | None = None


class EntityRecord(_Record):
    """A named thing with aliases (knowledge holds both to a subject's length)."""

    type: Literal["entity"]
    name: Annotated[str, _text(limits.SUBJECT[1], 1)]
    aliases: Annotated[
        list[Annotated[str, _text(limits.SUBJECT[1], 1)]] | None,
        Field(max_length=limits.PREDICATE_LIST_ITEMS),
    ] = None
    kind: Annotated[OptionalText, _text(limits.TYPE_NAME[1])] = None


class FactRecord(_Record):
    """A fact: subject, predicate, object, what it cites and where it applies."""

    type: Literal["fact"]
    subject: Annotated[str, _text(limits.SUBJECT[1], 1)]
    predicate: Annotated[str, _text(limits.PREDICATE_OBJECT[1], 1)]
    object: Annotated[str, _text(limits.PREDICATE_OBJECT[1], 1)]
    # Empty or null: the fact cites no source.
    source: SourceId | Literal[""] | None = None
    evidence: Annotated[OptionalText, _text(limits.EVIDENCE_TEXT[1])] = None
    locator: Annotated[OptionalText, _text(1024)] = None
    valid_from: TimeText | None = None
    valid_to: TimeText | None = None
    trust_tier: Annotated[int, Field(ge=0, le=4)] | None = None
    authority: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    repository: Annotated[OptionalText, _text(limits.REPOSITORY_PATH_CURSOR[1])] = None
    branch: Annotated[OptionalText, _text(limits.ID_LIKE[1])] = None
    code_path: Annotated[OptionalText, _text(limits.REPOSITORY_PATH_CURSOR[1])] = None
    document_type: Annotated[OptionalText, _text(limits.TYPE_NAME[1])] = None

    @field_validator("valid_to")
    @classmethod
    def _after_valid_from(cls, value: str | None, info: ValidationInfo) -> str | None:
        start = info.data.get("valid_from")
        if value and start and _parse_time(value) <= _parse_time(start):
            raise PydanticCustomError("out_of_range", "must be after valid_from")
        return value

    @field_validator("repository")
    @classmethod
    def _canonical(cls, value: str | None) -> str | None:
        if not value:
            return None
        canonical = canonicalize(value)
        if not canonical:
            raise PydanticCustomError("unsupported_repository",
                                      "not a supported repository identity")
        return canonical


class CorrectionRecord(FactRecord):
    """A fact that replaces the fact with key ``corrects`` (never overwrites: the old
    version is closed, and stays readable through known_as_of / as_of)."""

    type: Literal["correction"]  # type: ignore[assignment]
    corrects: Annotated[str, _text(512, 1)]
    reason: Annotated[OptionalText, _text(2048)] = None


Record = Annotated[SourceRecord | EntityRecord | FactRecord | CorrectionRecord,
                   Field(discriminator="type")]
_RECORD: TypeAdapter[Any] = TypeAdapter(Record)


@dataclass(frozen=True)
class RecordError:
    """Why the record at ``position`` (a file's line, a request's index) is refused:
    ``field`` within it ("" for the record itself) and a stable ``reason``."""

    position: int
    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason} ({self.message})" if self.field else self.message


class IngestFileError(Exception):
    """The records are invalid; ``errors`` holds (position, reason) pairs."""

    def __init__(self, errors: Iterable[RecordError | tuple[int, str]]) -> None:
        self.record_errors = [e if isinstance(e, RecordError)
                              else RecordError(e[0], "", "invalid_record", e[1]) for e in errors]
        super().__init__("; ".join(f"line {line}: {reason}" for line, reason in self.errors))

    @property
    def errors(self) -> list[tuple[int, str]]:
        return [(e.position, str(e)) for e in self.record_errors]


@dataclass
class ParsedFile:
    sources: list[knowledge_pb2.SourceInput] = field(default_factory=list)
    entities: list[knowledge_pb2.EntityInput] = field(default_factory=list)
    facts: list[knowledge_pb2.FactInput] = field(default_factory=list)
    fact_lines: list[int] = field(default_factory=list)
    correction_lines: list[int] = field(default_factory=list)
    # (fact key corrected, replacement, reason), applied in file order after the facts.
    corrections: list[tuple[str, knowledge_pb2.FactInput, str]] = field(default_factory=list)
    repositories: set[str] = field(default_factory=set)
    # Source ids facts cite that the file does not define -> the lines citing them; they
    # must already be sources of the project (``ingest_file`` checks before writing).
    cited_sources: dict[str, list[int]] = field(default_factory=dict)


def _time(value: str | None) -> Any:
    return to_timestamp(_parse_time(value)) if value else None


def _fact_input(record: FactRecord, parsed: ParsedFile) -> knowledge_pb2.FactInput:
    if record.repository:
        parsed.repositories.add(record.repository)
    fact = knowledge_pb2.FactInput(
        subject=record.subject, predicate=record.predicate, object=record.object,
        source_id=record.source or "", evidence=record.evidence or "",
        locator=record.locator or "", valid_from=_time(record.valid_from),
        valid_to=_time(record.valid_to), repository=record.repository or "",
        branch=record.branch or "", code_path=record.code_path or "",
        document_type=record.document_type or "",
    )
    if record.trust_tier is not None:
        fact.trust_tier = record.trust_tier
    if record.authority is not None:
        fact.authority = float(record.authority)
    return fact


def collect(records: Iterable[tuple[int, Any]]) -> ParsedFile:
    """Knowledge's inputs from validated records (position, record); raises
    IngestFileError for what only the whole set shows: a source id defined twice, or no
    record at all."""
    parsed = ParsedFile()
    errors = _collect(records, parsed)
    if errors:
        raise IngestFileError(errors)
    if not (parsed.sources or parsed.entities or parsed.facts or parsed.corrections):
        raise IngestFileError([(0, "the file holds no records")])
    return parsed


def _collect(records: Iterable[tuple[int, Any]], parsed: ParsedFile) -> list[RecordError]:
    errors: list[RecordError] = []
    source_lines: dict[str, int] = {}
    fact_sources: list[tuple[int, str]] = []
    for number, record in records:
        if isinstance(record, SourceRecord):
            if record.id in source_lines:
                errors.append(RecordError(number, "id", "duplicate",
                                          f"duplicate of line {source_lines[record.id]}"))
                continue
            source_lines[record.id] = number
            parsed.sources.append(knowledge_pb2.SourceInput(
                source_id=record.id, source_type=record.source_type or "",
                title=record.title or "", uri=record.uri or "",
                observed_at=_time(record.observed_at)))
        elif isinstance(record, EntityRecord):
            parsed.entities.append(knowledge_pb2.EntityInput(
                name=record.name, aliases=record.aliases or [], kind=record.kind or ""))
        elif isinstance(record, CorrectionRecord):
            parsed.corrections.append(
                (record.corrects, _fact_input(record, parsed), record.reason or ""))
            parsed.correction_lines.append(number)
            if record.source:
                fact_sources.append((number, record.source))
        else:
            parsed.facts.append(_fact_input(record, parsed))
            parsed.fact_lines.append(number)
            if record.source:
                fact_sources.append((number, record.source))
    for number, source_id in fact_sources:
        if source_id not in source_lines:
            parsed.cited_sources.setdefault(source_id, []).append(number)
    return errors


def validate_record(number: int, value: Any) -> Any:
    """One decoded record as its model; raises IngestFileError naming its field."""
    if not isinstance(value, dict):
        raise IngestFileError([RecordError(number, "", "malformed", "not a JSON object")])
    try:
        return _RECORD.validate_python(value)
    except ValidationError as refused:
        error = fields.first_error(refused.errors())
        name = fields.error_field(error, value, error["loc"])
        raise IngestFileError([RecordError(number, name, fields.reason(error),
                                           error["msg"])]) from None


def parse_jsonl(path: Path) -> ParsedFile:
    """Validates the whole file; raises IngestFileError listing bad lines."""
    with path.open(encoding="utf-8") as handle:
        return parse_records(enumerate(handle, start=1))


def parse_records(numbered: Iterable[tuple[int, str | object]]) -> ParsedFile:
    """Validates every record: (position, a JSONL line or an already decoded value), the
    position being a file's line number or a request's record index. Raises
    IngestFileError listing each bad record (the first MAX_REPORTED_ERRORS)."""
    errors: list[RecordError] = []
    valid: list[tuple[int, Any]] = []
    for number, line in numbered:
        if isinstance(line, str) and not line.strip():
            continue
        try:
            value = json.loads(line) if isinstance(line, str) else line
            valid.append((number, validate_record(number, value)))
        except json.JSONDecodeError as exc:
            errors.append(RecordError(number, "", "malformed", f"invalid JSON ({exc.msg})"))
        except IngestFileError as refused:
            errors += refused.record_errors
        if len(errors) >= MAX_REPORTED_ERRORS:
            break
    parsed = ParsedFile()
    errors += _collect(valid, parsed)
    errors.sort(key=lambda e: e.position)
    if errors:
        raise IngestFileError(errors[:MAX_REPORTED_ERRORS])
    if not (parsed.sources or parsed.entities or parsed.facts or parsed.corrections):
        raise IngestFileError([(0, "the file holds no records")])
    return parsed
