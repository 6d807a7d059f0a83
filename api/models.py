"""The knowledge records REST answers carry (facts, proposals, sources, changes), declared
once, and ``from_proto``, which fills any of them from the service's message.

Fields keep the protobuf field names; values are spelled as MCP spells them: an enum is
its value's name without the enum's prefix, lowercase (``FACT_STATE_ACTIVE`` ->
``"active"``), a timestamp RFC 3339 or null when unset, a nested message null when unset.
"""

from __future__ import annotations

import functools
import re
import typing
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response

from vera.api.routing import ResponseBody
from vera.knowledge.v1 import knowledge_resources_pb2

M = TypeVar("M", bound=BaseModel)

FactState = Literal["unspecified", "proposed", "active", "disputed", "retracted", "superseded"]
Verification = Literal["unspecified", "verified", "unverified", "withdrawn"]


@functools.cache
def _enum_prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_spelling(enum: EnumDescriptor, number: int) -> str:
    """``FACT_STATE_ACTIVE`` -> ``active``: the MCP spelling of an enum value."""
    value = enum.values_by_number.get(number)
    name = value.name if value is not None else f"{_enum_prefix(enum)}UNSPECIFIED"
    return name.removeprefix(_enum_prefix(enum)).lower()


# Fields whose values are enums, and their enums: what ``protobuf_spelling`` spells back.
_ENUM_FIELDS = {"state": "FactState", "verification": "VerificationState"}


def protobuf_spelling(answer: Any) -> Any:
    """``answer`` (a dumped model) with its enum values spelt as protobuf's JSON spells
    them (``"active"`` -> ``"FACT_STATE_ACTIVE"``): the spelling REST answered before
    version 2 (``docs/rest-api.md``), kept for one release behind
    ``VERA_API__VALUE_SPELLING=protobuf``."""
    if isinstance(answer, list):
        return [protobuf_spelling(item) for item in answer]
    if not isinstance(answer, dict):
        return answer
    spelt = {}
    for name, value in answer.items():
        enum = _ENUM_FIELDS.get(name)
        if enum is not None and isinstance(value, str):
            descriptor = knowledge_resources_pb2.DESCRIPTOR.enum_types_by_name[enum]
            spelt[name] = f"{_enum_prefix(descriptor)}{value.upper()}"
        else:
            spelt[name] = protobuf_spelling(value)
    return spelt


def spelt(answer: ResponseBody, spelling: str) -> ResponseBody | Response:
    """The answer, its values spelt as the deployment's ``api.value_spelling`` says."""
    if spelling == "mcp":
        return answer
    return JSONResponse(protobuf_spelling(answer.model_dump(mode="json")))


def timestamp(stamp: Timestamp) -> datetime:
    return stamp.ToDatetime(tzinfo=UTC)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation (``Fact | None``, ``list[Citation]``) names, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _single(field: Any, value: Any, annotation: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return enum_spelling(field.enum_type, value)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name == Timestamp.DESCRIPTOR.full_name:
            return timestamp(value)
        model = _model_in(annotation)
        return from_proto(model, value) if model is not None else value
    return value


def from_proto(model: type[M], message: Message, **extra: Any) -> M:
    """``model`` from ``message``'s fields of the same names (``extra`` for the rest)."""
    values: dict[str, Any] = {}
    by_name = message.DESCRIPTOR.fields_by_name
    for name, info in model.model_fields.items():
        field = by_name.get(name)
        if name in extra or field is None:
            continue
        value = getattr(message, name)
        if field.is_repeated:
            values[name] = [_single(field, item, info.annotation) for item in value]
        elif field.type == FieldDescriptor.TYPE_MESSAGE and not message.HasField(name):
            values[name] = None
        else:
            values[name] = _single(field, value, info.annotation)
    return model.model_validate({**values, **extra})


# Knowledge's records, as REST answers them ----------------------------------------------------


class Citation(ResponseBody):
    source_id: str
    locator: str
    title: str
    uri: str
    excerpt: str
    verification: Verification
    source_type: str
    observed_at: datetime | None
    stale: bool


class Fact(ResponseBody):
    """One version of a fact (bi-temporal: valid time and transaction time)."""

    fact_key: str
    version_id: str
    scope_id: str
    subject: str
    predicate: str
    object: str
    state: FactState
    trust_tier: int
    authority: float
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime | None
    superseded_at: datetime | None
    repository: str
    branch: str
    code_path: str
    document_type: str
    source_type: str
    citations: list[Citation]
    conflicting_fact_keys: list[str]
    superseded_by: str
    corrects: str


class TaskContext(ResponseBody):
    runtime: str
    session_ref: str
    task_ref: str
    repository_ref: str


class PendingProposal(ResponseBody):
    """A proposal under review, with the proposer's task context, branch and code path,
    and the source it cites (a harvest's file and line range; empty for an agent's)."""

    fact_key: str
    version_id: str
    proposer_principal_id: str
    subject: str
    predicate: str
    object: str
    evidence: list[str]
    context: TaskContext | None
    proposed_at: datetime | None
    conflicting_fact_keys: list[str]
    known_fact_key: str
    branch: str
    code_path: str
    source_id: str
    locator: str
    source_uri: str
    source_observed_at: datetime | None
    repository: str


class ConflictedAttempt(ResponseBody):
    """A proposal refused because it contradicts active facts of the project."""

    attempt_id: str
    proposer_principal_id: str
    subject: str
    predicate: str
    object: str
    contradicted_fact_keys: list[str]
    context: TaskContext | None
    attempted_at: datetime | None
    branch: str
    code_path: str


class Source(ResponseBody):
    source_id: str
    source_type: str
    title: str
    uri: str
    observed_at: datetime | None


class SourceVersion(ResponseBody):
    version: int
    source_type: str
    title: str
    uri: str
    observed_at: datetime | None
    recorded_at: datetime | None


class SourceFreshness(ResponseBody):
    stale: bool
    age_days: int
    stale_after_days: int
    reason: str


class Actor(ResponseBody):
    principal_id: str
    display_name: str
    # Shown beside the name, which another principal may also carry (curating.principal_handle).
    handle: str


class Change(ResponseBody):
    """One entry of a project's change feed."""

    position: int
    change: str
    scope_id: str
    fact: Fact | None
    source_id: str
    created_at: datetime | None
    actor: Actor | None

