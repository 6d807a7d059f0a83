"""What a REST request must be before any route sees it, and reading what it carries.

``RequestGuard`` runs before routing, so before authentication and before any service
call. In local-dev every caller is the local administrator, so a web page the developer
visits must not be able to drive the API:

- Host and Origin are checked as on the MCP endpoint (the SDK's check): a Host not listed
  is 421 (DNS rebinding), an Origin not listed exactly is 403 (a cross-site page, a page on
  another local port). A request without Origin, which no browser omits on a cross-site
  write, stays valid.
- A body must be ``application/json`` (415): a form or a ``text/plain`` fetch, the
  requests a page may send without CORS, is refused. The one exception is a urlencoded
  form under ``/console/`` (``CONSOLE_PREFIX``): the console's own pages post forms, and
  each one must carry its session's CSRF token in a cookie that is never sent cross-site
  (``vera.api.console.security``).
- A body is at most ``MAX_BODY_BYTES`` (413), or ``INGEST_MAX_BODY_BYTES`` on the ingest
  route (a batch of curated records, each fact's evidence up to 8,000 characters): refused
  unread on its Content-Length, and cut off while it streams in, before anything else
  reads it. It must have arrived whole
  within ``body_timeout`` seconds (408), so a client trickling it in holds nothing for long.
- A body allowed past ``MAX_BODY_BYTES`` is read only for a caller its headers prove may
  send it (``admit_large_body``: the key and the curator's right, 401/403 unread), and
  only ``large_bodies_in_flight`` of them at once (429 ``quota_exceeded``, bucket
  ``large_bodies``, unread): anyone may make the process hold 16 KiB per connection,
  nobody but a few curators 2 MiB.

Each refusal is ``invalid_input`` naming the header or the body (one that leaves the body
unread closes the connection: ``vera.entrypoints.unread_body``). Liveness and readiness read
no body; their Host may also be an address (``vera.addresses``), since the kubelet dials
the pod's, but never a name that is not served.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vera.addresses import is_address_host_header
from vera.api.errors import error_response
from vera.errors import InvalidInput, QuotaExceeded, VeraError

MAX_BODY_BYTES = 16 * 1024
INGEST_MAX_BODY_BYTES = 2 * 1024 * 1024
INGEST_PATH = re.compile(r"^/curation/projects/(?P<project>[^/]+)/ingest$")
LARGE_BODIES_BUCKET = "large_bodies"
LARGE_BODY_RETRY_SECONDS = 1
PROBE_PATHS = frozenset({"/livez", "/readyz"})
CONSOLE_PREFIX = "/console/"

# The status the SDK's check answers -> the header it refused and the setting that admits
# it (a hostname or a reverse proxy in front of a deployment).
_REFUSED_HEADER = {421: ("host", "VERA_API__ALLOWED_HOSTS"),
                   403: ("origin", "VERA_API__ALLOWED_ORIGINS")}


# Raises VeraError unless the request's headers show a caller who may send a large body.
AdmitLargeBody = Callable[[Request], Awaitable[None]]


class _Refused(Exception):
    def __init__(self, error: VeraError, status: int | None = None) -> None:
        self.error = error
        self.status = status


class RequestGuard:
    """ASGI middleware: admits a request by its headers, then reads its body, bounded,
    and hands the app a replay of it."""

    def __init__(
        self, app: ASGIApp, security: TransportSecuritySettings, body_timeout: float,
        admit_large_body: AdmitLargeBody, large_bodies_in_flight: int,
    ) -> None:
        self._app = app
        self._security = TransportSecurityMiddleware(security)
        self._body_timeout = body_timeout
        self._admit_large_body = admit_large_body
        self._large_bodies_in_flight = large_bodies_in_flight
        self._large_bodies = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["path"] in PROBE_PATHS:
            await self._probe(scope, receive, send)
            return
        with contextlib.ExitStack() as held:
            try:
                request = Request(scope)
                await self._admit(request)
                if _carries_body(request.headers):
                    limit = body_limit(scope["path"])
                    if limit > MAX_BODY_BYTES:
                        await self._take_large_body_slot(request)
                        held.callback(self._release_large_body_slot)
                    try:
                        async with asyncio.timeout(self._body_timeout):
                            body = await _read_bounded(receive, limit)
                    except TimeoutError:
                        raise _Refused(InvalidInput("body", reason="timeout"), 408) from None
                    if body is None:  # the client went away mid-body: nobody to answer
                        return
                    receive = _replay(body, receive)
            except _Refused as refused:
                response = error_response(refused.error, refused.status)
                if response.status_code == 401:
                    response.headers["WWW-Authenticate"] = 'Bearer realm="vera-api"'
                await response(scope, receive, send)
                return
            await self._app(scope, receive, send)

    async def _probe(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A probe reads no body; its Host is the pod's address (kubelet) or one served."""
        request = Request(scope)
        if not is_address_host_header(request.headers.get("host", "")):
            try:
                await self._admit(request)
            except _Refused as refused:
                await error_response(refused.error, refused.status)(scope, receive, send)
                return
        await self._app(scope, receive, send)

    async def _take_large_body_slot(self, request: Request) -> None:
        try:
            await self._admit_large_body(request)
        except VeraError as refused:
            raise _Refused(refused) from None
        if self._large_bodies >= self._large_bodies_in_flight:
            raise _Refused(QuotaExceeded("too many large bodies in flight",
                                         bucket=LARGE_BODIES_BUCKET,
                                         retry_after_seconds=LARGE_BODY_RETRY_SECONDS))
        self._large_bodies += 1

    def _release_large_body_slot(self) -> None:
        self._large_bodies -= 1

    async def _admit(self, request: Request) -> None:
        refusal = await self._security.validate_request(request, is_post=False)
        if refusal is not None:
            header, setting = _REFUSED_HEADER[refusal.status_code]
            raise _Refused(InvalidInput(header, f"{header} not allowed; the setting {setting} "
                                        "admits it", reason="not_allowed", setting=setting),
                           refusal.status_code)
        headers = request.headers
        if _carries_body(headers) and not _acceptable_body(request.url.path,
                                                           headers.get("content-type")):
            raise _Refused(InvalidInput("content-type", "a body must be application/json",
                                        reason="unsupported_media_type"), 415)
        length = headers.get("content-length", "")
        limit = body_limit(request.url.path)
        if length.isdigit() and int(length) > limit:
            raise _Refused(_too_large(limit), 413)


def _carries_body(headers: Headers) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0") != "0"


def _media_type(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


def _acceptable_body(path: str, content_type: str | None) -> bool:
    media_type = _media_type(content_type)
    if media_type == "application/json":
        return True
    return path.startswith(CONSOLE_PREFIX) and media_type == "application/x-www-form-urlencoded"


def ingest_project(path: str) -> str | None:
    """The project slug of an ingest route's path; None for any other path."""
    match = INGEST_PATH.match(path)
    return match["project"] if match else None


def body_limit(path: str) -> int:
    """The most bytes a request to ``path`` may carry."""
    return INGEST_MAX_BODY_BYTES if INGEST_PATH.match(path) else MAX_BODY_BYTES


def _too_large(limit: int) -> InvalidInput:
    return InvalidInput("body", f"at most {limit} bytes", reason="too_large", limit=limit)


async def _read_bounded(receive: Receive, limit: int) -> bytes | None:
    """The whole body, refused as soon as it passes ``limit``; None if the client left."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            raise _Refused(_too_large(limit), 413)
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the body already read, then the client's own events."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed
