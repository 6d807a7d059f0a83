"""Console sessions, kept server-side in this process.

A session is a random id in an HttpOnly, SameSite=Strict cookie (``Secure`` when the
public address is https: ``cookie_secure``) naming who signed in and that session's
CSRF token. Sign-out deletes it here, so a copied cookie stops working at once. Sessions end after
``console_idle_seconds`` without a request and ``console_session_seconds`` after sign-in,
and with the API key they were signed in with: before a console request is served, a
session whose key was last found standing more than ``VERA_MCP__REVOCATION_CACHE_SECONDS``
ago asks identity again (``SessionKeyCheck``), and a revoked key or a disabled user ends
it. Each principal keeps at most ``MAX_SESSIONS_PER_PRINCIPAL``: its own sign-ins evict
its own oldest session, never another curator's.

Sessions live in one API process: several replicas need the load balancer to keep a
browser on one (sticky sessions), or the curator signs in again.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from vera.api.auth import RestCaller
from vera.errors import VeraError
from vera.identity.v1 import identity_pb2
from vera.mcp_tokens import LOCAL_KEY_ID

log = logging.getLogger(__name__)

COOKIE = "vera_console"
# Sessions one principal keeps at most; its oldest is dropped first, so a flood of its
# sign-ins never grows memory and never evicts anyone else's session.
MAX_SESSIONS_PER_PRINCIPAL = 10
CONSOLE_PATH = "/console/"


@dataclass
class Session:
    caller: RestCaller
    csrf_token: str
    started: float
    last_seen: float
    # When identity last said the session's API key stands (sign-in counts).
    key_checked: float = 0.0


@dataclass
class SessionStore:
    idle_seconds: float
    lifetime_seconds: float
    # How long a key found standing is believed before identity is asked again.
    recheck_seconds: float = 5.0
    _sessions: dict[str, Session] = field(default_factory=dict)

    def start(self, caller: RestCaller) -> tuple[str, Session]:
        now = time.monotonic()
        self._drop_lapsed(now)
        mine = [sid for sid, s in self._sessions.items()
                if s.caller.principal_id == caller.principal_id]
        for session_id in mine[: max(0, len(mine) - MAX_SESSIONS_PER_PRINCIPAL + 1)]:
            del self._sessions[session_id]
        session_id = secrets.token_urlsafe(32)
        session = Session(caller, secrets.token_urlsafe(32), now, now, now)
        self._sessions[session_id] = session
        return session_id, session

    def _lapsed(self, session: Session, now: float) -> bool:
        return (now - session.last_seen > self.idle_seconds
                or now - session.started > self.lifetime_seconds)

    def _drop_lapsed(self, now: float) -> None:
        for session_id in [sid for sid, s in self._sessions.items() if self._lapsed(s, now)]:
            del self._sessions[session_id]

    def key_check_due(self, session_id: str | None) -> Session | None:
        """The live session with this id when its key is due to be checked again, else
        None (local sessions stand on the data dir's secret: nothing to revoke)."""
        session = self._sessions.get(session_id) if session_id else None
        if session is None or session.caller.key_id in ("", LOCAL_KEY_ID):
            return None
        if time.monotonic() - session.key_checked < self.recheck_seconds:
            return None
        return session

    def find(self, session_id: str | None) -> Session | None:
        """The live session with this id (touched), or None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if self._lapsed(session, now):
            del self._sessions[session_id]
            return None
        session.last_seen = now
        return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)


class SessionKeyCheck:
    """Before a console request is served, ends its session if the API key it was signed
    in with no longer stands (revoked, or its user disabled), asking identity at most once
    per ``recheck_seconds`` per session. An identity outage ends nothing: the page itself
    then fails as unavailable."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(CONSOLE_PATH):
            await self._check(scope)
        await self._app(scope, receive, send)

    async def _check(self, scope: Scope) -> None:
        state = scope["app"].state
        store: SessionStore = state.console_sessions
        session_id = _cookie(scope)
        session = store.key_check_due(session_id)
        if session is None:
            return
        caller = session.caller
        try:
            reply = await state.backends.identity.CheckCredential(
                identity_pb2.CheckCredentialRequest(
                    principal_id=caller.principal_id, key_id=caller.key_id),
                timeout=state.settings.rpc.deadline_seconds)
        except VeraError as error:
            if error.reason in ("INVALID_INPUT", "NOT_FOUND"):
                store.end(session_id)
            return
        if reply.state == identity_pb2.CREDENTIAL_STATE_ACTIVE:
            session.key_checked = time.monotonic()
        else:
            log.info("console session ended: its credential no longer stands")
            store.end(session_id)


def _cookie(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                return None
            morsel = jar.get(COOKIE)
            return morsel.value if morsel is not None else None
    return None


def session_of(request: Request) -> Session | None:
    store: SessionStore = request.app.state.console_sessions
    return store.find(request.cookies.get(COOKIE))


def csrf_matches(session: Session, sent: object) -> bool:
    return isinstance(sent, str) and hmac.compare_digest(session.csrf_token, sent)


def cookie_secure(request: Request) -> bool:
    """Whether the console's cookies are ``Secure``: the request came over https, or the
    deployment says its public address is (``VERA_API__SECURE_COOKIES``: TLS ends at an
    Ingress or proxy in front, so the API itself sees plain http)."""
    return request.url.scheme == "https" or request.app.state.settings.api.secure_cookies


def set_session_cookie(response: Response, request: Request, session_id: str) -> None:
    response.set_cookie(
        COOKIE, session_id, path="/console/", httponly=True, samesite="strict",
        secure=cookie_secure(request),
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(
        COOKIE, path="/console/", httponly=True, samesite="strict",
        secure=cookie_secure(request),
    )
