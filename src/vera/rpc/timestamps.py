"""datetime <-> google.protobuf.Timestamp, with "unset" meaning None.

The one converter every service and the gateway use, so a value outside what a Timestamp
can hold (0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z) is ``invalid_input``
naming the field everywhere, never an internal error."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from google.protobuf.timestamp_pb2 import Timestamp

from vera.errors import InvalidInput


@overload
def to_timestamp(value: datetime) -> Timestamp: ...
@overload
def to_timestamp(value: None) -> None: ...
@overload
def to_timestamp(value: datetime | None) -> Timestamp | None: ...
def to_timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC))
    return ts


def from_timestamp(message, field: str, name: str = "") -> datetime | None:
    """Reads ``message.<field>`` as an aware datetime, or None when unset; an error names
    ``name`` (the field's path in the request, e.g. ``facts[3].valid_from``) or ``field``."""
    if not message.HasField(field):
        return None
    try:
        return getattr(message, field).ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(
            name or field, "outside the Timestamp range", reason="out_of_range"
        ) from None


def parse_iso8601(text: str) -> datetime | None:
    """ISO-8601 (date or date-time; ``Z`` allowed) as an aware UTC datetime, or None when
    it is not one or names an instant a Timestamp cannot hold (year 0 or 10000, or an
    offset that carries 0001-01-01 / 9999-12-31 past the range)."""
    try:
        parsed = datetime.fromisoformat(text.strip())
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
