"""Console sessions, kept server-side in this process.

A session is a random id in an HttpOnly, SameSite=Strict cookie (``Secure`` when the
public address is https: ``cookie_secure``) naming who signed in and that session's
CSRF token. Sign-out deletes it here, so a copied cookie stops working at once. Sessions end after
``console_idle_seconds`` without a request and ``console_session_seconds`` after sign-in:
the API key a session was made from is not re-checked on each request.

Sessions live in one API process: several replicas need the load balancer to keep a
browser on one (sticky sessions), or the curator signs in again.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response

from vera.api.auth import RestCaller

COOKIE = "vera_console"
# Sessions kept at most; the oldest is dropped first (a flood of sign-ins evicts, never
# grows memory without bound).
MAX_SESSIONS = 10_000


@dataclass
class Session:
    caller: RestCaller
    csrf_token: str
    started: float
    last_seen: float


@dataclass
class SessionStore:
    idle_seconds: float
    lifetime_seconds: float
    _sessions: dict[str, Session] = field(default_factory=dict)

    def start(self, caller: RestCaller) -> tuple[str, Session]:
        now = time.monotonic()
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.pop(next(iter(self._sessions)))
        session_id = secrets.token_urlsafe(32)
        session = Session(caller, secrets.token_urlsafe(32), now, now)
        self._sessions[session_id] = session
        return session_id, session

    def find(self, session_id: str | None) -> Session | None:
        """The live session with this id (touched), or None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_seen > self.idle_seconds or (
            now - session.started > self.lifetime_seconds
        ):
            del self._sessions[session_id]
            return None
        session.last_seen = now
        return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)


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
