"""Internal call authentication: who may call a VERA service.

Every client channel signs a short-lived HS256 assertion with the deployment's shared
key (``VERA_RPC__AUTH_KEY``) and sends it as ``authorization: Bearer <jwt>``; every
server checks it before the handler runs. End users' tokens never travel downstream. The
standard health service stays open because Kubernetes' gRPC probes cannot send metadata.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import grpc
import jwt
from pydantic import SecretStr

from vera.addresses import is_loopback_address
from vera.config import ConfigError
from vera.errors import Unauthenticated
from vera.rpc.errors import INTERNAL_CREDENTIAL, to_rpc_status

log = logging.getLogger(__name__)

ISSUER = AUDIENCE = "vera-internal"
ALGORITHM = "HS256"
LIFETIME_SECONDS = 300
# A cached assertion is re-minted this long before it expires, so none arrives stale.
RENEW_BEFORE_SECONDS = 60
CLOCK_SKEW_SECONDS = 30
METADATA_KEY = "authorization"
EXEMPT_PREFIX = "/grpc.health.v1.Health/"
_MAX_CACHED = 256

Clock = Callable[[], float]


def _refused(message: str, reason: str) -> Unauthenticated:
    return Unauthenticated(message, reason=reason, credential=INTERNAL_CREDENTIAL)


class AssertionSigner:
    """Mints the caller's assertion once and reuses it until shortly before it expires."""

    def __init__(self, key: SecretStr, caller: str, clock: Clock = time.time) -> None:
        self._key = key.get_secret_value()
        self._caller = caller
        self._clock = clock
        self._header = ""
        self._renew_at = 0.0

    def header(self) -> str:
        now = self._clock()
        if now >= self._renew_at:
            issued = int(now)
            token = jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "sub": self._caller, "iat": issued,
                 "exp": issued + LIFETIME_SECONDS},
                self._key,
                algorithm=ALGORITHM,
            )
            self._header = f"Bearer {token}"
            self._renew_at = issued + LIFETIME_SECONDS - RENEW_BEFORE_SECONDS
        return self._header


class AssertionVerifier:
    """Checks an ``authorization`` value; remembers verified assertions until they expire,
    since each client reuses one for minutes."""

    def __init__(self, key: SecretStr, clock: Clock = time.time) -> None:
        self._key = key.get_secret_value()
        self._clock = clock
        self._verified: dict[str, float] = {}

    def verify(self, authorization: str | None) -> None:
        if not authorization:
            raise _refused("internal call without an assertion", "missing")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise _refused("internal call with a malformed assertion", "malformed")
        now = self._clock()
        expires = self._verified.get(token)
        if expires is not None and now < expires:
            return
        try:
            # Times are checked below against this verifier's clock, the one the cache uses.
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                options={"require": ["iss", "aud", "sub", "iat", "exp"],
                         "verify_exp": False, "verify_iat": False},
            )
            issued, expires = float(claims["iat"]), float(claims["exp"])
        except (jwt.PyJWTError, TypeError, ValueError):
            raise _refused("internal assertion refused", "invalid") from None
        if issued > now + CLOCK_SKEW_SECONDS or not claims["sub"]:
            raise _refused("internal assertion refused", "invalid")
        if expires + CLOCK_SKEW_SECONDS <= now:
            raise _refused("internal assertion expired", "expired")
        if len(self._verified) >= _MAX_CACHED:
            self._verified.clear()
        self._verified[token] = expires


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
    """Refuses every call but health's without a valid assertion: UNAUTHENTICATED."""

    def __init__(self, verifier: AssertionVerifier) -> None:
        self._verifier = verifier

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(EXEMPT_PREFIX):
            return handler
        try:
            self._verifier.verify(_authorization(handler_call_details.invocation_metadata))
        except Unauthenticated as exc:
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
