"""datetime <-> google.protobuf.Timestamp, with "unset" meaning None."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp


def to_timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC))
    return ts


def from_timestamp(message, field: str) -> datetime | None:
    """Reads ``message.<field>`` as an aware datetime, or None when unset."""
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=UTC)
