"""Internal call authentication: who may call a VERA service, and which of its methods.

Every client channel signs a short-lived HS256 assertion with the deployment's key
(``VERA_RPC__AUTH_KEY``) and sends it as ``authorization: Bearer <jwt>``. Its audience is
the service the call is for and its subject the calling component; every server checks
it before the handler runs: signature (the current key or the next one, so a key can be
rotated without errors), audience (the called service), lifetime, and whether the caller
may call that method (``vera.rpc.callers``). End users' tokens never travel downstream.
The standard health service stays open because Kubernetes' gRPC probes cannot send
metadata.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import grpc
import jwt
from pydantic import SecretStr

from vera.addresses import is_loopback_address
from vera.config import ConfigError
from vera.errors import Unauthenticated, Unauthorized
from vera.rpc.callers import may_call, split_method
from vera.rpc.errors import INTERNAL_CREDENTIAL, to_rpc_status

log = logging.getLogger(__name__)

ISSUER = "vera-internal"
ALGORITHM = "HS256"
# An assertion seen on the (plaintext) internal network can be replayed only this long,
# only to the one service it names and only for its caller's methods.
LIFETIME_SECONDS = 60
# A cached assertion is re-minted this long before it expires, so none arrives stale.
RENEW_BEFORE_SECONDS = 20
CLOCK_SKEW_SECONDS = 10
METADATA_KEY = "authorization"
EXEMPT_PREFIX = "/grpc.health.v1.Health/"
_MAX_CACHED = 256

Clock = Callable[[], float]


def _refused(message: str, reason: str) -> Unauthenticated:
    return Unauthenticated(message, reason=reason, credential=INTERNAL_CREDENTIAL)


def audience_of(path: str) -> str:
    """The audience an assertion for the method at ``path`` names: the called service."""
    return split_method(path)[0]


class AssertionSigner:
    """Mints the caller's assertion for each service it calls once, and reuses it until
    shortly before it expires."""

    def __init__(self, key: SecretStr, caller: str, clock: Clock = time.time) -> None:
        self._key = key.get_secret_value()
        self._caller = caller
        self._clock = clock
        self._minted: dict[str, tuple[str, float]] = {}  # audience -> (header, renew at)

    def header(self, audience: str) -> str:
        now = self._clock()
        header, renew_at = self._minted.get(audience, ("", 0.0))
        if now >= renew_at:
            issued = int(now)
            token = jwt.encode(
                {"iss": ISSUER, "aud": audience, "sub": self._caller, "iat": issued,
                 "exp": issued + LIFETIME_SECONDS},
                self._key,
                algorithm=ALGORITHM,
            )
            header = f"Bearer {token}"
            self._minted[audience] = (header, issued + LIFETIME_SECONDS - RENEW_BEFORE_SECONDS)
        return header


class _Verified(NamedTuple):
    audience: str
    caller: str
    expires: float


class AssertionVerifier:
    """Checks an ``authorization`` value for a call to one method; remembers verified
    assertions until they expire, since each client reuses one for many calls.

    ``keys``: the current key first, then the next one (during a rotation).
    """

    def __init__(self, keys: Sequence[SecretStr], clock: Clock = time.time) -> None:
        if not keys:
            raise ValueError("an assertion verifier needs a key")
        self._keys = tuple(key.get_secret_value() for key in keys)
        self._clock = clock
        self._verified: dict[str, _Verified] = {}

    def verify(self, authorization: str | None, path: str) -> str:
        """Returns the calling component, or raises Unauthenticated (no valid assertion
        for this service) or Unauthorized (a caller not allowed this method)."""
        if not authorization:
            raise _refused("internal call without an assertion", "missing")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise _refused("internal call with a malformed assertion", "malformed")
        now = self._clock()
        verified = self._verified.get(token)
        if verified is None or now >= verified.expires + CLOCK_SKEW_SECONDS:
            verified = self._decode(token, now)
        if verified.audience != audience_of(path):
            raise _refused("internal assertion for another service", "invalid")
        if not may_call(verified.caller, path):
            raise Unauthorized("this component may not call this method",
                               reason="caller", credential=INTERNAL_CREDENTIAL)
        return verified.caller

    def _decode(self, token: str, now: float) -> _Verified:
        claims = None
        for key in self._keys:
            try:
                # Times are checked below against this verifier's clock, the one the
                # cache uses; the audience is checked per call against the method's.
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=[ALGORITHM],
                    issuer=ISSUER,
                    options={"require": ["iss", "aud", "sub", "iat", "exp"],
                             "verify_exp": False, "verify_iat": False, "verify_aud": False},
                )
                break
            except jwt.InvalidSignatureError:
                continue
            except (jwt.PyJWTError, TypeError, ValueError):
                raise _refused("internal assertion refused", "invalid") from None
        if claims is None:
            raise _refused("internal assertion refused", "invalid")
        try:
            issued, expires = float(claims["iat"]), float(claims["exp"])
        except (TypeError, ValueError):
            raise _refused("internal assertion refused", "invalid") from None
        audience, caller = claims["aud"], claims["sub"]
        if (not isinstance(audience, str) or not isinstance(caller, str) or not caller
                or issued > now + CLOCK_SKEW_SECONDS
                or expires - issued > LIFETIME_SECONDS):
            raise _refused("internal assertion refused", "invalid")
        if expires + CLOCK_SKEW_SECONDS <= now:
            raise _refused("internal assertion expired", "expired")
        if len(self._verified) >= _MAX_CACHED:
            self._verified.clear()
        verified = _Verified(audience, caller, expires)
        self._verified[token] = verified
        return verified


def _authorization(metadata: tuple | None) -> str | None:
    for key, value in metadata or ():
        if key == METADATA_KEY:
            return value if isinstance(value, str) else value.decode("ascii", "replace")
    return None


def _refusing(handler: grpc.RpcMethodHandler, status: grpc.Status) -> grpc.RpcMethodHandler:
    """A handler of the same shape whose every call ends with ``status``."""

    async def refuse(request_or_iterator, context):
        await context.abort_with_status(status)

    kind = next(
        name for name in ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
        if getattr(handler, name) is not None
    )
    # grpc's handlers are namedtuples at runtime; the stubs declare an abstract class.
    return handler._replace(**{kind: refuse})  # type: ignore[attr-defined]


class InternalAuthInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call but health's without a valid assertion for this service
    (UNAUTHENTICATED), or from a component not allowed the method (UNAUTHORIZED)."""

    def __init__(self, verifier: AssertionVerifier) -> None:
        self._verifier = verifier

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(EXEMPT_PREFIX):
            return handler
        try:
            self._verifier.verify(_authorization(handler_call_details.invocation_metadata),
                                  handler_call_details.method)
        except (Unauthenticated, Unauthorized) as exc:
            return _refusing(handler, to_rpc_status(exc))
        return handler


def server_auth_key(key: SecretStr | None, environment: str, address: str) -> SecretStr | None:
    """The key a service checks callers with. None only for a local service on loopback
    (single-developer runs and load tests); anything else without a key must not start."""
    if key is not None:
        return key
    if environment == "local" and is_loopback_address(address):
        log.warning("internal calls are not authenticated (no VERA_RPC__AUTH_KEY; "
                    "allowed only locally on loopback)")
        return None
    raise ConfigError(
        "VERA_RPC__AUTH_KEY: required unless VERA_ENVIRONMENT=local and the service "
        "binds a loopback address")
