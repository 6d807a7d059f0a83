"""Server-side input bounds (GUIDE §Input Bounds), declared once per argument.

A ``Param`` both renders its JSON Schema fragment (for ``tools/list``) and checks a
value (for the guard), so the advertised schema and the enforced bound cannot drift. The
numbers are ``vera.limits``, the published contract the services enforce as well.
A failed check raises ``BoundsError``; the guard turns it into ``invalid_input`` with
``data.field`` and a stable ``data.reason``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from vera.limits import (
    AUTHORITY,
    ID_LIKE,
    PREDICATE_LIST_ITEM_CHARS,
    PREDICATE_LIST_ITEMS,
    REPOSITORY_PATH_CURSOR,
    ROOTS_ITEMS,
    TIMESTAMP,
    TRUST_TIER,
)
from vera.rpc.timestamps import parse_iso8601 as parse_timestamp

Kind = Literal[
    "string", "integer", "number", "boolean", "enum", "string_list", "timestamp", "roots"
]


class BoundsError(Exception):
    """An argument failed its bound; ``field`` names it, ``reason`` is a stable code."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    description: str
    required: bool = False
    default: Any = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    max_items: int | None = None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"description": self.description}
        if self.kind in ("string", "timestamp"):
            out["type"] = "string"
            if self.low is not None:
                out["minLength"] = int(self.low)
            if self.high is not None:
                out["maxLength"] = int(self.high)
        elif self.kind in ("integer", "number"):
            out["type"] = self.kind
            if self.low is not None:
                out["minimum"] = self.low
            if self.high is not None:
                out["maximum"] = self.high
        elif self.kind == "boolean":
            out["type"] = "boolean"
        elif self.kind == "enum":
            out["type"] = "string"
            out["enum"] = list(self.choices)
        elif self.kind == "roots":
            out["type"] = "array"
            out["items"] = {
                "type": "object",
                "properties": {
                    "repository": {"type": "string", "minLength": 1,
                                   "maxLength": REPOSITORY_PATH_CURSOR[1]},
                    "branch": {"type": "string", "minLength": 1, "maxLength": ID_LIKE[1]},
                },
                "required": ["repository"],
                "additionalProperties": False,
            }
            out["maxItems"] = self.max_items
        elif self.kind == "string_list":
            out["type"] = "array"
            out["items"] = {
                "type": "string",
                "minLength": 1,
                "maxLength": PREDICATE_LIST_ITEM_CHARS,
            }
            out["maxItems"] = self.max_items
        if self.default is not None:
            out["default"] = self.default
        return out

    def check(self, value: Any) -> Any:
        """Returns the normalized value (a datetime for timestamps) or raises BoundsError."""
        check = _CHECKS[self.kind]
        return check(self, value)


def _check_string(p: Param, value: Any) -> str:
    if not isinstance(value, str):
        raise BoundsError(p.name, "not_a_string")
    if p.low is not None and len(value) < p.low:
        raise BoundsError(p.name, "too_short")
    if p.high is not None and len(value) > p.high:
        raise BoundsError(p.name, "too_long")
    return value


def _check_integer(p: Param, value: Any) -> int:
    # bool is an int in Python but not in JSON; an integral float is an integer in JSON.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BoundsError(p.name, "not_an_integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise BoundsError(p.name, "not_an_integer")
        value = int(value)
    _check_range(p, value)
    return value


def _check_number(p: Param, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BoundsError(p.name, "not_a_number")
    _check_range(p, value)
    return float(value)


def _check_range(p: Param, value: float) -> None:
    if p.low is not None and value < p.low:
        raise BoundsError(p.name, "below_minimum")
    if p.high is not None and value > p.high:
        raise BoundsError(p.name, "above_maximum")


def _check_boolean(p: Param, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BoundsError(p.name, "not_a_boolean")
    return value


def _check_enum(p: Param, value: Any) -> str:
    if not isinstance(value, str) or value not in p.choices:
        raise BoundsError(p.name, "not_allowed")
    return value


def _check_string_list(p: Param, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise BoundsError(p.name, "not_a_list")
    if p.max_items is not None and len(value) > p.max_items:
        raise BoundsError(p.name, "too_many_items")
    for item in value:
        if not isinstance(item, str) or not 1 <= len(item) <= PREDICATE_LIST_ITEM_CHARS:
            raise BoundsError(p.name, "bad_item")
    return list(value)


def _check_roots(p: Param, value: Any) -> list[dict[str, str | None]]:
    """Workspace roots, each ``{repository, branch?}``; a detached HEAD omits branch."""
    if not isinstance(value, list):
        raise BoundsError(p.name, "not_a_list")
    if not value or (p.max_items is not None and len(value) > p.max_items):
        raise BoundsError(p.name, "too_many_items" if value else "too_short")
    roots = []
    for item in value:
        if not isinstance(item, dict) or set(item) - {"repository", "branch"}:
            raise BoundsError(p.name, "bad_item")
        repository, branch = item.get("repository"), item.get("branch")
        if not isinstance(repository, str) or not (
            1 <= len(repository) <= REPOSITORY_PATH_CURSOR[1]
        ):
            raise BoundsError(p.name, "bad_item")
        if branch is not None and (
            not isinstance(branch, str) or not 1 <= len(branch) <= ID_LIKE[1]
        ):
            raise BoundsError(p.name, "bad_item")
        roots.append({"repository": repository, "branch": branch})
    return roots


def _check_timestamp(p: Param, value: Any) -> datetime:
    text = _check_string(p, value)
    parsed = parse_timestamp(text)
    if parsed is None:
        raise BoundsError(p.name, "not_iso8601")
    return parsed


_CHECKS: dict[str, Callable[[Param, Any], Any]] = {
    "string": _check_string,
    "integer": _check_integer,
    "number": _check_number,
    "boolean": _check_boolean,
    "enum": _check_enum,
    "string_list": _check_string_list,
    "roots": _check_roots,
    "timestamp": _check_timestamp,
}


@dataclass(frozen=True)
class ArgumentSpec:
    """The arguments of one tool, plus checks that span several arguments."""

    params: tuple[Param, ...]
    cross_checks: tuple[Callable[[Mapping[str, Any]], None], ...] = field(default=())

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Checks every argument and fills defaults; unknown names are refused.

        An explicit JSON null counts as absent, as clients often send it for optional
        arguments. Required arguments are checked in declaration order so the error
        names the first missing one deterministically.
        """
        known = {p.name for p in self.params}
        for name in sorted(arguments):
            if name not in known:
                raise BoundsError(name, "unknown_argument")
        out: dict[str, Any] = {}
        for p in self.params:
            value = arguments.get(p.name)
            if value is None:
                if p.required:
                    raise BoundsError(p.name, "required")
                out[p.name] = p.default
                continue
            out[p.name] = p.check(value)
        for check in self.cross_checks:
            check(out)
        return out


# Reusable argument declarations --------------------------------------------------------


def string(
    name: str, bounds: tuple[int, int], description: str, *, required: bool = False
) -> Param:
    return Param(name, "string", description, required=required, low=bounds[0], high=bounds[1])


def timestamp(name: str, description: str) -> Param:
    return Param(name, "timestamp", description, low=TIMESTAMP[0], high=TIMESTAMP[1])


def integer(name: str, bounds: tuple[int, int], description: str, default: int | None) -> Param:
    return Param(name, "integer", description, default=default, low=bounds[0], high=bounds[1])


def enum(
    name: str,
    choices: Sequence[str],
    description: str,
    *,
    default: str | None = None,
    required: bool = False,
) -> Param:
    return Param(
        name, "enum", description, required=required, default=default, choices=tuple(choices)
    )


def predicate_list(name: str, description: str) -> Param:
    return Param(name, "string_list", description, max_items=PREDICATE_LIST_ITEMS)


def roots(description: str) -> Param:
    return Param("roots", "roots", description, max_items=ROOTS_ITEMS)


def authority(description: str) -> Param:
    return Param("min_authority", "number", description, low=AUTHORITY[0], high=AUTHORITY[1])


def trust_tier(description: str) -> Param:
    return Param("max_trust_tier", "integer", description, low=TRUST_TIER[0], high=TRUST_TIER[1])


def boolean(name: str, description: str, default: bool) -> Param:
    return Param(name, "boolean", description, default=default)
