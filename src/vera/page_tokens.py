"""Opaque page tokens that carry one position (a sequence number, offset or ledger
position): the one codec, so a token every service decodes is a non-negative int64 or
``invalid_input`` naming ``page_token``, never a number PostgreSQL overflows on."""

from __future__ import annotations

import base64
import binascii
import re

from vera.errors import InvalidInput

MAX_POSITION = 2**63 - 1  # bigint, the type of every sequence, offset and position
_DIGITS = re.compile(r"[0-9]{1,19}")


def encode_position(position: int, prefix: str = "v1:") -> str:
    return base64.urlsafe_b64encode(f"{prefix}{position}".encode()).decode().rstrip("=")


def decode_position(token: str, prefix: str = "v1:", field: str = "page_token") -> int:
    """The position ``encode_position`` wrote; 0 for an empty token (the first page)."""
    if not token:
        return 0
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raw = ""
    digits = raw.removeprefix(prefix) if raw.startswith(prefix) else ""
    if not _DIGITS.fullmatch(digits) or int(digits) > MAX_POSITION:
        raise InvalidInput(field, "malformed", reason="malformed")
    return int(digits)
