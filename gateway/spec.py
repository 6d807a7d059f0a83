"""The shape of one served tool: its ``ToolSpec`` (arguments, output schema, annotations,
authorization class, quota bucket, cost class, body and text rendering).

Annotations follow the GUIDE's table exactly; ``_meta`` carries the cost class, quota
bucket and authorization class so a client can reason about a tool before calling it.
Each tool family declares its specs in ``<family>_tools.py`` and their bodies and
renderings in ``<family>_handlers.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types

from vera.gateway import schemas
from vera.gateway.auth import AuthClass
from vera.gateway.bounds import ArgumentSpec

if TYPE_CHECKING:
    from vera.gateway.call_context import Handler

META_PREFIX = "dev.vera/"
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_META_PARAMETER = "_meta.idempotencyKey"
IDEMPOTENCY_KEY_MAX = 255

Renderer = Callable[[dict[str, Any]], str]


Bucket = Literal["read", "context", "propose", "feedback", "snapshot"]
Cost = Literal["low", "medium", "high"]


@dataclass(frozen=True)
class Hints:
    read_only: bool
    idempotent: bool
    destructive: bool = False
    open_world: bool = True  # every tool touches shared memory that changes outside the call


READ_HINTS = Hints(read_only=True, idempotent=True)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: ArgumentSpec
    output_schema: dict[str, Any]
    hints: Hints
    auth_class: AuthClass
    bucket: Bucket
    cost: Cost
    # The body: bounds-checked arguments in, the structured result out.
    handler: Handler
    # The plain-text rendering of the result; None renders it as JSON.
    renderer: Renderer | None = None
    # The class a call additionally needs when ``persist`` is true (knowledge_get_context).
    persist_auth_class: AuthClass | None = None
    # Write tools accept an idempotency key (header or params._meta); see gateway.idempotency.
    accepts_idempotency_key: bool = False
    # A replay still runs the tool body (its result discarded) so the service records the
    # retry, as knowledge_propose's report requires.
    replay_reaches_service: bool = False

    def required_class(self, arguments: Mapping[str, Any]) -> AuthClass:
        if self.persist_auth_class is not None and arguments.get("persist") is True:
            return self.persist_auth_class
        return self.auth_class

    def definition(self, *, can_persist: bool = True) -> types.Tool:
        """The tool as ``tools/list`` shows it. ``can_persist`` false: the caller's
        credential lacks ``persist_auth_class``, so for that caller the call cannot write
        (the guard refuses ``persist=true``) and the tool is advertised read-only, which is
        what lets a client that approves per tool run it without a prompt (ADR 0019)."""
        hints = self.hints
        if self.persist_auth_class is not None and not can_persist:
            hints = replace(hints, read_only=True, destructive=False)
        meta: dict[str, Any] = {
            f"{META_PREFIX}cost_class": self.cost,
            f"{META_PREFIX}quota_bucket": self.bucket,
            f"{META_PREFIX}authorization_class": self.auth_class.value,
        }
        if self.persist_auth_class is not None:
            meta[f"{META_PREFIX}persist_authorization_class"] = self.persist_auth_class.value
        if self.accepts_idempotency_key:
            meta[f"{META_PREFIX}idempotency"] = {
                "header": IDEMPOTENCY_HEADER,
                "parameter": IDEMPOTENCY_META_PARAMETER,
                "maxLength": IDEMPOTENCY_KEY_MAX,
            }
        return types.Tool(
            name=self.name,
            title=self.title,
            description=schemas.explained(self.description, self.output_schema),
            input_schema=self.arguments.schema(),
            output_schema=copy.deepcopy(self.output_schema),
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=hints.read_only,
                destructive_hint=hints.destructive,
                idempotent_hint=hints.idempotent,
                open_world_hint=hints.open_world,
            ),
            meta=meta,
        )
