"""The curated record format `vera ingest` loads: one JSON object per record, a
``source``, ``entity``, ``fact`` or ``correction``, validated whole into knowledge's inputs.

One home for the format: the CLI checks a file with it before sending anything (so a bad
line is reported with its number and nothing is written), and the REST API's ingest route
checks every request with it again (the API trusts no client).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vera import limits
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.repository_identity import canonicalize
from vera.rpc.timestamps import to_timestamp

FACTS_PER_CALL = 500
MAX_REPORTED_ERRORS = 20

# field -> (type, max length or None): the published bounds (vera.limits) that knowledge
# enforces on the same fields, so a file is refused here, with its line, for what the
# service would refuse.
_STR = str
_ID = limits.ID_LIKE[1]
_PATH = limits.REPOSITORY_PATH_CURSOR[1]
_TYPE = limits.TYPE_NAME[1]
_TIME = limits.TIMESTAMP[1]
SOURCE_FIELDS: dict[str, tuple[type, int | None]] = {
    "id": (_STR, _ID), "source_type": (_STR, _TYPE), "title": (_STR, 1024),
    "uri": (_STR, 2048), "observed_at": (_STR, _TIME),
}
FACT_FIELDS: dict[str, tuple[type, int | None]] = {
    "subject": (_STR, limits.SUBJECT[1]), "predicate": (_STR, limits.PREDICATE_OBJECT[1]),
    "object": (_STR, limits.PREDICATE_OBJECT[1]), "source": (_STR, _ID),
    "evidence": (_STR, limits.EVIDENCE_TEXT[1]), "locator": (_STR, 1024),
    "valid_from": (_STR, _TIME), "valid_to": (_STR, _TIME), "trust_tier": (int, None),
    "authority": (float, None), "repository": (_STR, _PATH), "branch": (_STR, _ID),
    "code_path": (_STR, _PATH), "document_type": (_STR, _TYPE),
}
ENTITY_FIELDS: dict[str, tuple[type, int | None]] = {
    # knowledge holds entity names and aliases to a subject's length
    "name": (_STR, limits.SUBJECT[1]), "aliases": (list, limits.PREDICATE_LIST_ITEMS),
    "kind": (_STR, _TYPE),
}
# A correction is a fact line that replaces the fact with key ``corrects`` (never overwrites:
# the old version is closed, and stays readable through known_as_of / as_of).
CORRECTION_FIELDS: dict[str, tuple[type, int | None]] = {
    **FACT_FIELDS, "corrects": (_STR, 512), "reason": (_STR, 2048),
}
REQUIRED = {
    "source": ("id",), "fact": ("subject", "predicate", "object"), "entity": ("name",),
    "correction": ("corrects", "subject", "predicate", "object"),
}
FIELDS = {
    "source": SOURCE_FIELDS, "fact": FACT_FIELDS, "entity": ENTITY_FIELDS,
    "correction": CORRECTION_FIELDS,
}


class IngestFileError(Exception):
    """The file is invalid; ``errors`` holds (line number, reason) pairs."""

    def __init__(self, errors: list[tuple[int, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"line {line}: {reason}" for line, reason in errors))


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


def _parse_time(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{name}: not an ISO-8601 timestamp") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _check_fields(kind: str, obj: dict[str, Any]) -> None:
    spec = FIELDS[kind]
    for name in obj:
        if name != "type" and name not in spec:
            raise ValueError(f"{name}: unknown field for a {kind}")
    for name in REQUIRED[kind]:
        if obj.get(name) in (None, ""):
            raise ValueError(f"{name}: required")
    for name, (expected, limit) in spec.items():
        value = obj.get(name)
        if value is None:
            continue
        if expected is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, expected) and not isinstance(value, bool)
        if not ok:
            raise ValueError(f"{name}: must be {expected.__name__}")
        if limit is not None and len(value) > limit:
            raise ValueError(f"{name}: longer than {limit}")
    if kind == "entity" and not all(isinstance(a, str) and a for a in obj.get("aliases") or []):
        raise ValueError("aliases: must be non-empty strings")


def _fact_input(obj: dict[str, Any], parsed: ParsedFile) -> knowledge_pb2.FactInput:
    tier = obj.get("trust_tier")
    if tier is not None and not 0 <= tier <= 4:
        raise ValueError("trust_tier: must be 0..4")
    authority = obj.get("authority")
    if authority is not None and not 0.0 <= authority <= 1.0:
        raise ValueError("authority: must be 0.0..1.0")
    valid_from = _parse_time(obj["valid_from"], "valid_from") if obj.get("valid_from") else None
    valid_to = _parse_time(obj["valid_to"], "valid_to") if obj.get("valid_to") else None
    if valid_from and valid_to and valid_to <= valid_from:
        raise ValueError("valid_to: must be after valid_from")
    repository = ""
    if obj.get("repository"):
        repository = canonicalize(obj["repository"]) or ""
        if not repository:
            raise ValueError("repository: not a supported repository identity")
        parsed.repositories.add(repository)
    fact = knowledge_pb2.FactInput(
        subject=obj["subject"], predicate=obj["predicate"], object=obj["object"],
        source_id=obj.get("source") or "", evidence=obj.get("evidence") or "",
        locator=obj.get("locator") or "", valid_from=to_timestamp(valid_from),
        valid_to=to_timestamp(valid_to), repository=repository,
        branch=obj.get("branch") or "", code_path=obj.get("code_path") or "",
        document_type=obj.get("document_type") or "",
    )
    if tier is not None:
        fact.trust_tier = tier
    if authority is not None:
        fact.authority = float(authority)
    return fact


def parse_jsonl(path: Path) -> ParsedFile:
    """Validates the whole file; raises IngestFileError listing bad lines."""
    with path.open(encoding="utf-8") as handle:
        return parse_records(enumerate(handle, start=1))


def parse_records(numbered: Iterable[tuple[int, str | object]]) -> ParsedFile:
    """Validates every record: (position, a JSONL line or an already decoded value), the
    position being a file's line number or a request's record index. Raises
    IngestFileError listing (position, reason) for each bad record."""
    parsed = ParsedFile()
    errors: list[tuple[int, str]] = []
    source_lines: dict[str, int] = {}
    fact_sources: list[tuple[int, str]] = []
    for number, line in numbered:
        if isinstance(line, str) and not line.strip():
            continue
        try:
            obj = json.loads(line) if isinstance(line, str) else line
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            kind = obj.get("type")
            if kind not in FIELDS:
                raise ValueError("type: must be source, fact, entity or correction")
            _check_fields(kind, obj)
            if kind == "source":
                if obj["id"] in source_lines:
                    raise ValueError(f"id: duplicate of line {source_lines[obj['id']]}")
                source_lines[obj["id"]] = number
                observed = obj.get("observed_at")
                parsed.sources.append(knowledge_pb2.SourceInput(
                    source_id=obj["id"], source_type=obj.get("source_type") or "",
                    title=obj.get("title") or "", uri=obj.get("uri") or "",
                    observed_at=to_timestamp(_parse_time(observed, "observed_at"))
                    if observed else None,
                ))
            elif kind == "entity":
                parsed.entities.append(knowledge_pb2.EntityInput(
                    name=obj["name"], aliases=obj.get("aliases") or [],
                    kind=obj.get("kind") or "",
                ))
            elif kind == "correction":
                parsed.corrections.append(
                    (obj["corrects"], _fact_input(obj, parsed), obj.get("reason") or ""))
                parsed.correction_lines.append(number)
                if obj.get("source"):
                    fact_sources.append((number, obj["source"]))
            else:
                parsed.facts.append(_fact_input(obj, parsed))
                parsed.fact_lines.append(number)
                if obj.get("source"):
                    fact_sources.append((number, obj["source"]))
        except json.JSONDecodeError as exc:
            errors.append((number, f"invalid JSON ({exc.msg})"))
        except ValueError as exc:
            errors.append((number, str(exc)))
        if len(errors) >= MAX_REPORTED_ERRORS:
            break
    for number, source_id in fact_sources:
        if source_id not in source_lines:
            parsed.cited_sources.setdefault(source_id, []).append(number)
    errors.sort()
    if errors:
        raise IngestFileError(errors)
    if not (parsed.sources or parsed.entities or parsed.facts or parsed.corrections):
        raise IngestFileError([(0, "the file holds no records")])
    return parsed
