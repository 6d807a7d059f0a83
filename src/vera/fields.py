"""A pydantic validation error as VERA's error contract: the field it names and a stable
reason, the same for a REST body (``vera.api.errors``) and a `vera ingest` line
(``vera.ingest_records``).

- The field is a path into the document: ``records[3].subject``, ``trust_tier``. A union
  of record shapes is told apart by its ``type`` field, and pydantic puts the chosen shape
  in the location (``records[3].fact.subject``): that step is not a field, so it is left
  out; a ``type`` no shape has is named as ``records[3].type``.
- The reason is one of VERA's reason codes (``required``, ``unknown_field``, ``too_long``,
  ``too_many``, ``out_of_range``, ``malformed``), or the type of a custom error a
  validator raised (``PydanticCustomError("duplicate", ...)``), which is already one.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from pydantic_core import ErrorDetails, core_schema

UNION_TAG = "type"

_REASONS = {
    "missing": "required",
    "too_short": "required",
    "string_too_short": "required",
    "extra_forbidden": "unknown_field",
    "string_too_long": "too_long",
    "bytes_too_long": "too_long",
    "too_long": "too_many",
    "greater_than": "out_of_range",
    "greater_than_equal": "out_of_range",
    "less_than": "out_of_range",
    "less_than_equal": "out_of_range",
    "finite_number": "out_of_range",
}
_BUILT_IN = frozenset(typing.get_args(core_schema.ErrorType))
_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})


def reason(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind in _REASONS:
        return _REASONS[kind]
    return "malformed" if kind in _BUILT_IN else kind


def field_path(location: Sequence[int | str], document: Any) -> str:
    """``("records", 3, "fact", "subject")`` -> ``records[3].subject``, walking
    ``document`` (the value validated) to leave out union tags."""
    parts: list[str] = []
    value = document
    for position, step in enumerate(location):
        last = position == len(location) - 1
        if isinstance(step, int):
            parts.append(f"[{step}]")
            value = value[step] if isinstance(value, list) and 0 <= step < len(value) else None
            continue
        if not last and isinstance(value, dict) and value.get(UNION_TAG) == step:
            continue  # the union shape pydantic chose, not a field
        parts.append(f".{step}" if parts else step)
        value = value.get(step) if isinstance(value, dict) else None
    return "".join(parts)


def error_field(error: ErrorDetails, document: Any, location: Sequence[int | str]) -> str:
    """The field ``error`` names, ``location`` being its location within ``document``."""
    path = field_path(location, document)
    if error["type"] in _TAG_ERRORS:
        return f"{path}.{UNION_TAG}" if path else UNION_TAG
    return path


def first_error(errors: Sequence[ErrorDetails]) -> ErrorDetails:
    """The error to report: a field the shape does not know before anything else, since
    a misspelt field also shows up as the missing one it was meant to be."""
    return next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
