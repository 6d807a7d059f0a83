"""Who is calling, and which authorization classes the credential grants.

Both profiles take a bearer JWT: ``BearerAuthenticator`` turns it into a principal at the
HTTP boundary (``vera.gateway.resource``), before the SDK handles the MCP message, and
leaves the resolved ``Caller`` in the request state; the guard then checks the tool's
class scope. local-dev's tokens are local ones (``vera.mcp_tokens``: minted by the local
REST API for the data dir's secret, acting as the local principal), so another user of
the machine, who cannot read the secret, cannot call a tool. Messages that run no tool
go through ``DiscoveryAuthenticator`` instead: the token is verified just the same, but
no principal is looked up.
The token itself stops here: services only ever receive the principal id, and neither the
token nor its claims are logged.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from starlette.requests import Request

from vera.config import Settings
from vera.errors import VeraError
from vera.gateway.credentials import PRINCIPAL_DISABLED, CredentialCheck, CredentialRefused
from vera.gateway.errors import tool_error
from vera.gateway.tokens import TokenRejected, TokenVerifier, VerifiedToken
from vera.identity.v1 import identity_pb2
from vera.mcp_tokens import LOCAL_KEY_ID
from vera.rpc.backends import Backends

log = logging.getLogger(__name__)

# Where the HTTP boundary leaves the resolved caller for the guard (request.state).
CALLER_STATE_KEY = "vera_caller"


class AuthClass(StrEnum):
    """What a tool needs the credential to grant (each tool's spec names one)."""

    READ = "READ"
    PROPOSE = "PROPOSE"
    FEEDBACK = "FEEDBACK"
    SNAPSHOT = "SNAPSHOT"


@dataclass(frozen=True)
class Caller:
    principal_id: str
    granted: frozenset[AuthClass]
    auth_profile: str
    # The verified bearer token. It is verified once, before the body is read, and the
    # principal is looked up from it afterwards.
    token: VerifiedToken | None = None

    @property
    def token_holder(self) -> str:
        """Who presented the credential (issuer and subject): what discovery, which acts
        as no principal, is metered by."""
        return f"{self.token.issuer}\x00{self.token.subject}" if self.token else ""


def scope_names(settings: Settings) -> dict[AuthClass, str]:
    mcp = settings.mcp
    return {
        AuthClass.READ: mcp.scope_read,
        AuthClass.PROPOSE: mcp.scope_propose,
        AuthClass.FEEDBACK: mcp.scope_feedback,
        AuthClass.SNAPSHOT: mcp.scope_snapshot,
    }


class Authenticator(Protocol):
    async def authenticate(self, request: Request | None, backends: Backends) -> Caller: ...


class AuthFailure(Exception):
    """The HTTP boundary refuses the request: 401 (no or bad credential) or 403 (a valid
    token without the server-wide required scopes)."""

    def __init__(
        self, status: int, reason: str, *, token_presented: bool, required_scope: str = ""
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.token_presented = token_presented
        self.required_scope = required_scope


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


class BearerAuthenticator:
    """A verified bearer JWT, mapped to a real principal."""

    def __init__(
        self,
        settings: Settings,
        verifier: TokenVerifier | None = None,
        credentials: CredentialCheck | None = None,
    ) -> None:
        self._verifier = verifier if verifier is not None else TokenVerifier(settings)
        self._required = tuple(settings.mcp.required_scopes)
        self._profile = settings.auth_profile
        self._classes = scope_names(settings)
        # The lookup spends from the tool call's budget, which counts from the request's
        # arrival (gateway.guard); it can never take longer than the whole budget.
        self._lookup_seconds = min(
            settings.rpc.deadline_seconds, settings.mcp.request_budget_seconds
        )
        self._credentials = (
            credentials
            if credentials is not None
            else CredentialCheck(settings, deadline_seconds=self._lookup_seconds)
        )

    @property
    def verifier(self) -> TokenVerifier:
        return self._verifier

    @property
    def credentials(self) -> CredentialCheck:
        return self._credentials

    async def resolve(self, request: Request, backends: Backends) -> Caller:
        """The caller acting as its principal; the token the boundary already verified
        (``DiscoveryAuthenticator``, before the body was read) is not verified again."""
        earlier = getattr(request.state, CALLER_STATE_KEY, None)
        verified = (
            earlier.token
            if isinstance(earlier, Caller) and earlier.token is not None
            else await self.verify(request.headers.get("authorization"))
        )
        principal_id = await self._principal(verified, backends)
        return Caller(
            principal_id=principal_id,
            granted=frozenset(
                cls for cls, name in self._classes.items() if name in verified.scopes
            ),
            auth_profile=self._profile,
            token=verified,
        )

    async def verify(self, authorization: str | None) -> VerifiedToken:
        """The verified token, if it carries the server-wide required scopes."""
        token = bearer_token(authorization)
        if token is None:
            raise AuthFailure(
                401, "missing", token_presented=authorization is not None and bool(authorization)
            )
        try:
            verified = await self._verifier.verify(token)
        except TokenRejected as exc:
            log.info("bearer token refused: %s", exc.reason)
            raise AuthFailure(401, exc.reason, token_presented=True) from None
        missing = [scope for scope in self._required if scope not in verified.scopes]
        if missing:
            log.info("bearer token refused: insufficient_scope")
            raise AuthFailure(
                403, "insufficient_scope", token_presented=True, required_scope=missing[0]
            )
        return verified

    async def _builtin_principal(self, verified: VerifiedToken, backends: Backends) -> str:
        """The principal a built-in token acts as, while the key it names stands."""
        try:
            principal_id = str(uuid.UUID(verified.subject))
        except ValueError:
            raise AuthFailure(401, "subject", token_presented=True) from None
        try:
            return await self._credentials.principal(principal_id, verified.key_id, backends)
        except CredentialRefused as refused:
            log.info("bearer token refused: %s", refused.reason)
            raise AuthFailure(401, refused.reason, token_presented=True) from None
        except VeraError as exc:
            if exc.reason in ("INVALID_INPUT", "NOT_FOUND"):
                log.info("bearer token refused: unknown_principal")
                raise AuthFailure(401, "unknown_principal", token_presented=True) from None
            raise

    async def _principal(self, verified: VerifiedToken, backends: Backends) -> str:
        if verified.kind == "builtin":
            return await self._builtin_principal(verified, backends)
        try:
            response = await backends.identity.EnsureExternalPrincipal(
                identity_pb2.EnsureExternalPrincipalRequest(
                    issuer=verified.issuer,
                    subject=verified.subject,
                    email=verified.email,
                    email_verified=verified.email_verified,
                ),
                timeout=self._lookup_seconds,
            )
        except VeraError as exc:
            if exc.reason in ("INVALID_INPUT", "NOT_FOUND"):
                log.info("bearer token refused: unknown_principal")
                raise AuthFailure(401, "unknown_principal", token_presented=True) from None
            if exc.reason == "UNAUTHENTICATED":  # identity refuses a disabled user's login
                log.info("bearer token refused: %s", PRINCIPAL_DISABLED)
                raise AuthFailure(401, PRINCIPAL_DISABLED, token_presented=True) from None
            raise
        return response.principal.principal_id

    async def authenticate(self, request: Request | None, backends: Backends) -> Caller:
        caller = getattr(request.state, CALLER_STATE_KEY, None) if request is not None else None
        if not isinstance(caller, Caller):
            # Only reachable if the HTTP boundary was bypassed; refuse rather than guess.
            raise tool_error("unauthenticated")
        return caller


class DiscoveryAuthenticator(BearerAuthenticator):
    """The HTTP boundary every POST passes before its body is read, and all that messages
    running no tool (initialize, tools/list, ping, notifications) pass: the token must
    verify and carry the required scopes, and a built-in token's key must stand (a cached
    verdict, ``vera.gateway.credentials``), but no external principal is looked up in
    identity, since such a message acts as no one. The caller it leaves
    has no principal and no class, so it could authorize nothing even if it were asked."""

    async def resolve(self, request: Request, backends: Backends) -> Caller:
        verified = await self.verify(request.headers.get("authorization"))
        if verified.kind == "builtin" and verified.key_id != LOCAL_KEY_ID:
            # A revoked key's token lists no tools either (the verdict is cached, so the
            # tool call that follows asks identity no second time). A local token names
            # no key to revoke: its signature is all there is to check.
            await self._builtin_principal(verified, backends)
        return Caller(
            principal_id="", granted=frozenset(), auth_profile=self._profile, token=verified
        )
