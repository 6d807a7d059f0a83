"""A request's ids and page sizes, parsed in one place: a bad value is ``invalid_input``
naming the field, with the same reason in every service (``required``, ``malformed``,
``out_of_range``).

The other request fields have their own one home: page tokens (cursors) are
``vera.page_tokens``, optional timestamps ``vera.rpc.timestamps.from_timestamp``. This
module imports neither transport nor storage code, so domain rules use it too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from vera.errors import InvalidInput

# The longest spelling uuid.UUID reads (``urn:uuid:{...}``) with room for padding; a
# longer value is refused before it is read.
MAX_UUID_TEXT = 64


def as_uuid(value: str) -> uuid.UUID | None:
    """``value`` as a UUID, or None when it is not one: for a reference that may also be
    a name, or an id that, not being a UUID, names nothing."""
    if len(value) > MAX_UUID_TEXT:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


def optional_uuid(field: str, value: str) -> uuid.UUID | None:
    """None for an empty field; otherwise a UUID or ``invalid_input`` (``malformed``)."""
    if not value:
        return None
    parsed = as_uuid(value)
    if parsed is None:
        raise InvalidInput(field, "not a uuid", reason="malformed")
    return parsed


def parse_uuid(field: str, value: str) -> uuid.UUID:
    """A required UUID field: ``invalid_input`` (``required``) when it is empty."""
    parsed = optional_uuid(field, value)
    if parsed is None:
        raise InvalidInput(field, "required", reason="required")
    return parsed


def parse_uuids(field: str, values: Sequence[str]) -> list[uuid.UUID]:
    """A repeated UUID field; an error names the element (``scope_ids[2]``)."""
    return [parse_uuid(f"{field}[{i}]", value) for i, value in enumerate(values)]


def page_size(value: int, *, default: int, maximum: int, field: str = "page_size") -> int:
    """0 (unset) is ``default``; otherwise 1..``maximum`` or ``invalid_input``
    (``out_of_range``, with the ``maximum`` in the error's metadata)."""
    if value == 0:
        return default
    if not 1 <= value <= maximum:
        raise InvalidInput(
            field, f"must be 1..{maximum}", reason="out_of_range", maximum=maximum
        )
    return value
