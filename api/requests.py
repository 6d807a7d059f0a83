"""Reading a REST request's JSON body: bounded, an object, only the fields a route knows."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from vera.errors import InvalidInput

MAX_BODY_BYTES = 16 * 1024


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object ({} when empty); anything else is invalid_input "body"."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidInput("body", reason="too_large")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("body", reason="malformed") from None
    if not isinstance(value, dict):
        raise InvalidInput("body", reason="malformed")
    return value


def only_fields(body: dict[str, Any], *allowed: str) -> None:
    """Refuses a field the route does not know, naming it."""
    for name in body:
        if name not in allowed:
            raise InvalidInput(name, reason="unknown_field")
