"""What every console response carries, and the check every console form passes.

The pages run no inline script and load nothing from elsewhere, so the policy can forbid
both; they may not be framed (clickjacking a Verify button); and nothing they show is
kept by the browser's or a proxy's cache, nor sent to another site as a referrer (the
local sign-in URL carries a token).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vera.api.console.sessions import Session, csrf_matches
from vera.errors import InvalidInput

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",
    # Not no-referrer: Chromium then sends "Origin: null" with the console's own form posts,
    # which the request guard rightly refuses.
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
FORM_FIELD_MAX = 4096


class ConsoleHeaders:
    """ASGI wrapper: every response under ``/console/`` (pages, redirects, errors, static
    files) carries ``HEADERS``; one place, so no page can forget them."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self._app(scope, receive, send_secured)


async def form_fields(request: Request) -> dict[str, str]:
    """The urlencoded form (the guard bounded its size), one value per field."""
    try:
        parsed = parse_qs((await request.body()).decode(), keep_blank_values=True,
                          strict_parsing=False, max_num_fields=32)
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput("body", reason="malformed") from None
    fields = {name: values[-1] for name, values in parsed.items()}
    for name, value in fields.items():
        if len(value) > FORM_FIELD_MAX:
            raise InvalidInput(name, reason="too_long")
    return fields


class CsrfRefused(Exception):
    """A state change without the session's CSRF token (or without a session)."""


def require_csrf(session: Session | None, fields: dict[str, str]) -> Session:
    if session is None or not csrf_matches(session, fields.get("csrf_token")):
        raise CsrfRefused()
    return session
