"""Bearer JWT verification for the remote-authenticated profile.

Two token kinds may be valid at once:

- built-in (``vera.mcp_tokens``): HMAC-signed with ``VERA_MCP__JWT_SECRET`` (``JWT_ALGORITHM``,
  HS256 by default), issuer ``AUTH_ISSUER``, audience ``AUTH_AUDIENCE`` (local-dev: with the
  key derived from the data dir's secret); ``sub`` is a VERA principal id. They must carry
  ``exp`` and ``vera_key_id`` (``token_outdated`` otherwise: minted before either existed);
  past ``exp`` they are ``token_expired``. Whether their key still stands is the
  authenticator's question (``vera.gateway.credentials``), not this module's.
- external: signed by the OIDC provider with one of ``OAUTH_ALGORITHMS`` (asymmetric only),
  verified against the JWKS at ``OAUTH_JWKS_URL`` and/or the static ``OAUTH_SIGNING_KEY``,
  issuer ``OAUTH_ISSUER``, audience ``AUTH_AUDIENCE``, and a required ``exp``.

The header's ``alg`` picks the kind, and only that kind's key and issuer can then verify,
so an HMAC token can never be checked with a public key (or the reverse). ``alg: none``
is in no allowlist. Tokens that name their own key (``jku``, ``x5u``, ``jwk``, ``x5c``)
or critical extensions are refused before any key is looked up or fetched. Time claims
are checked here against an injectable clock, with a small leeway.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from vera.addresses import is_loopback_host
from vera.config import ConfigError, Settings
from vera.gateway.jwks import JwksCache, key_fits
from vera.mcp_tokens import KEY_ID_CLAIM, TokenKey, verifying_key

MAX_TOKEN_BYTES = 16 * 1024
# Seconds since the epoch a time claim may name: 1970-01-01 .. 9999-12-31T23:59:59Z.
NUMERIC_DATE_RANGE = (0, 253_402_300_799)
FORBIDDEN_HEADERS = ("jku", "x5u", "jwk", "x5c", "crit")
ASYMMETRIC = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)


def _kty(key: Any) -> str:
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC"
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return "OKP"
    return ""


class TokenRejected(Exception):
    """The token is not a valid credential here; ``reason`` is a stable slug for logs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Refusals of a built-in token that `vera connect` fixes by minting a new one; the gateway
# tells the client which (data.reason), every other refusal stays a bare invalid_token.
TOKEN_OUTDATED = "token_outdated"
TOKEN_EXPIRED = "token_expired"


@dataclass(frozen=True)
class VerifiedToken:
    kind: Literal["builtin", "external"]
    issuer: str
    subject: str
    scopes: frozenset[str]
    email: str = ""
    email_verified: bool = False
    # built-in: the API key it was minted from (``vera_key_id``).
    key_id: str = ""


def check_settings(settings: Settings) -> None:
    """Refuses a verification setup that cannot check every claim; one line per problem."""
    mcp = settings.mcp
    if settings.auth_profile == "local-dev":
        if mcp.local_token_key is None:
            raise ConfigError(
                "VERA_MCP__LOCAL_TOKEN_KEY: a local-dev gateway verifies local MCP tokens with "
                "the key `vera up` derives from the data dir's secret"
            )
        return
    if not mcp.auth_audience:
        raise ConfigError(
            "VERA_MCP__AUTH_AUDIENCE: token verification needs this resource server's audience"
        )
    if mcp.jwt_secret:
        if len(mcp.jwt_secret.get_secret_value()) < 32:
            raise ConfigError("VERA_MCP__JWT_SECRET: use at least 32 characters")
        if not mcp.auth_issuer:
            raise ConfigError("VERA_MCP__AUTH_ISSUER: built-in JWT verification needs the issuer")
    if mcp.oauth_jwks_url:
        _check_jwks_url(
            mcp.oauth_jwks_url, allow_loopback_http=mcp.oauth_jwks_allow_insecure_loopback
        )
    if mcp.oauth_jwks_url or mcp.oauth_signing_key:
        if not mcp.oauth_issuer:
            raise ConfigError("VERA_MCP__OAUTH_ISSUER: external OAuth verification needs it")
        bad = [alg for alg in mcp.oauth_algorithms if alg not in ASYMMETRIC]
        if bad or not mcp.oauth_algorithms:
            raise ConfigError(
                "VERA_MCP__OAUTH_ALGORITHMS: only asymmetric algorithms are allowed "
                f"({', '.join(ASYMMETRIC)})"
            )
        if mcp.oauth_signing_key:
            try:
                load_pem_public_key(mcp.oauth_signing_key.get_secret_value().encode())
            except (ValueError, TypeError):
                raise ConfigError("VERA_MCP__OAUTH_SIGNING_KEY: must be a PEM public key") from None


def _check_jwks_url(url: str, *, allow_loopback_http: bool) -> None:
    """Keys fetched over plain HTTP are whatever a network attacker says they are."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        raise ConfigError("VERA_MCP__OAUTH_JWKS_URL: not a URL") from None
    if parts.scheme == "https" and host:
        return
    if parts.scheme == "http" and is_loopback_host(host):
        if allow_loopback_http:
            return
        raise ConfigError(
            "VERA_MCP__OAUTH_JWKS_ALLOW_INSECURE_LOOPBACK: a plain-http loopback JWKS URL is "
            "for tests only and needs this set to true; use https otherwise"
        )
    raise ConfigError("VERA_MCP__OAUTH_JWKS_URL: must be an https URL")



def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return frozenset(raw)
    raise TokenRejected("malformed_scope")


def _number(claims: dict[str, Any], name: str) -> float | None:
    """A NumericDate claim as seconds, or None when absent.

    Anything but a finite number within ``NUMERIC_DATE_RANGE`` is malformed: NaN compares
    false with every time, so an unchecked ``exp: NaN`` would read as "never expires".
    """
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRejected(f"malformed_{name}")
    low, high = NUMERIC_DATE_RANGE
    # NaN fails both comparisons and infinities one; compared before float(), because an
    # integer beyond a float's range would overflow it.
    if not low <= value <= high:
        raise TokenRejected(f"malformed_{name}")
    return float(value)


class TokenVerifier:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        jwks: JwksCache | None = None,
    ) -> None:
        check_settings(settings)
        mcp = settings.mcp
        self._clock = clock
        self._audience = mcp.auth_audience
        self._leeway = mcp.oauth_leeway_seconds
        self._builtin: TokenKey | None = verifying_key(settings)
        self._external = bool(mcp.oauth_jwks_url or mcp.oauth_signing_key)
        self._external_issuer = mcp.oauth_issuer
        self._external_algs = frozenset(mcp.oauth_algorithms) if self._external else frozenset()
        self._static_key = (
            load_pem_public_key(mcp.oauth_signing_key.get_secret_value().encode())
            if mcp.oauth_signing_key
            else None
        )
        if jwks is None and mcp.oauth_jwks_url:
            jwks = JwksCache(
                mcp.oauth_jwks_url,
                cache_seconds=mcp.oauth_jwks_cache_seconds,
                min_refresh_seconds=mcp.oauth_jwks_min_refresh_seconds,
                fetch_seconds=mcp.oauth_jwks_fetch_seconds,
            )
        self._jwks = jwks

    @property
    def jwks(self) -> JwksCache | None:
        return self._jwks

    async def verify(self, token: str) -> VerifiedToken:
        if not token or len(token) > MAX_TOKEN_BYTES:
            raise TokenRejected("malformed")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRejected("malformed") from None
        if any(name in header for name in FORBIDDEN_HEADERS):
            raise TokenRejected("forbidden_header")
        alg = header.get("alg")
        builtin = self._builtin
        if builtin is not None and alg == builtin.algorithm:
            claims = self._decode(token, builtin.secret, alg, builtin.issuer, builtin.audience)
            key_id = claims.get(KEY_ID_CLAIM)
            if "exp" not in claims or not isinstance(key_id, str) or not key_id:
                raise TokenRejected(TOKEN_OUTDATED)
            self._check_times(claims, require_exp=True, expired=TOKEN_EXPIRED)
            return VerifiedToken(
                "builtin", claims["iss"], self._subject(claims), _scopes(claims), key_id=key_id
            )
        if isinstance(alg, str) and alg in self._external_algs:
            key = await self._external_key(header, alg)
            claims = self._decode(token, key, alg, self._external_issuer, self._audience)
            self._check_times(claims, require_exp=True)
            email = claims.get("email")
            return VerifiedToken(
                "external",
                claims["iss"],
                self._subject(claims),
                _scopes(claims),
                email=email if isinstance(email, str) else "",
                email_verified=claims.get("email_verified") is True,
            )
        raise TokenRejected("algorithm")

    async def _external_key(self, header: dict[str, Any], alg: str) -> Any:
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("malformed")
        if kid and self._jwks is not None:
            key = await self._jwks.key(kid, alg)
            if key is not None:
                return key
        if self._static_key is not None and key_fits(_kty(self._static_key), alg):
            return self._static_key
        raise TokenRejected("unknown_key")

    def _decode(
        self, token: str, key: Any, alg: str, issuer: str | None, audience: str | None
    ) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=audience,
                issuer=issuer,
                options={
                    "require": ["iss", "sub", "aud"],
                    "verify_exp": False,  # checked in _check_times against our clock
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.InvalidAudienceError:
            raise TokenRejected("audience") from None
        except jwt.InvalidIssuerError:
            raise TokenRejected("issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("signature") from None
        except jwt.PyJWTError:
            raise TokenRejected("invalid") from None

    def _check_times(
        self, claims: dict[str, Any], *, require_exp: bool, expired: str = "expired"
    ) -> None:
        now = self._clock()
        exp = _number(claims, "exp")
        nbf = _number(claims, "nbf")
        if exp is None and require_exp:
            raise TokenRejected("missing_exp")
        if exp is not None and now > exp + self._leeway:
            raise TokenRejected(expired)
        if nbf is not None and now < nbf - self._leeway:
            raise TokenRejected("not_yet_valid")

    @staticmethod
    def _subject(claims: dict[str, Any]) -> str:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub or len(sub) > 512:
            raise TokenRejected("subject")
        return sub
