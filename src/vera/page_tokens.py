"""Opaque page tokens (cursors): the one codec. A token carries one position (a sequence
number, offset or ledger position: a non-negative int64, never a number PostgreSQL
overflows on) or one key of a known shape (a conflict group's id); anything else is
``invalid_input`` naming ``page_token``."""

from __future__ import annotations

import base64
import binascii
import re

from vera.errors import InvalidInput

MAX_POSITION = 2**63 - 1  # bigint, the type of every sequence, offset and position
_DIGITS = re.compile(r"[0-9]{1,19}")


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode(token: str) -> str:
    """The text a token carries; "" when it is not one."""
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError, binascii.Error):
        return ""


def encode_position(position: int, prefix: str = "v1:") -> str:
    return _encode(f"{prefix}{position}")


def decode_position(token: str, prefix: str = "v1:", field: str = "page_token") -> int:
    """The position ``encode_position`` wrote; 0 for an empty token (the first page)."""
    if not token:
        return 0
    raw = _decode(token)
    digits = raw.removeprefix(prefix) if raw.startswith(prefix) else ""
    if not _DIGITS.fullmatch(digits) or int(digits) > MAX_POSITION:
        raise InvalidInput(field, "malformed", reason="malformed")
    return int(digits)


def encode_key(key: str, prefix: str) -> str:
    return _encode(f"{prefix}{key}")


def decode_key(token: str, prefix: str, shape: re.Pattern[str], field: str = "page_token") -> str:
    """The key ``encode_key`` wrote, which must match ``shape`` whole; "" for an empty
    token (the first page)."""
    if not token:
        return ""
    raw = _decode(token)
    key = raw.removeprefix(prefix) if raw.startswith(prefix) else ""
    if not shape.fullmatch(key):
        raise InvalidInput(field, "malformed", reason="malformed")
    return key
