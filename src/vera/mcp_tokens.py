"""The built-in MCP token: what the REST API mints (``POST /identity/mcp-token``, the
console's agent preview) and the gateway verifies (``vera.gateway.tokens``). The one home
of its claims.

An HMAC-signed JWT whose ``sub`` is a VERA principal and ``scope`` the capability classes
it grants. It always carries ``exp`` (``VERA_MCP__TOKEN_TTL_SECONDS`` after it was minted)
and ``vera_key_id``, the API key it was minted from, so that revoking the key or disabling
its user stops it (``vera.gateway.credentials``). A token without either was minted before
they existed and is refused (``token_outdated``).

Two keys sign them, one per profile:
- a team deployment's: ``VERA_MCP__JWT_SECRET`` for ``VERA_MCP__AUTH_ISSUER`` and
  ``…__AUTH_AUDIENCE``, shared by the API (mints) and the gateway (verifies);
- local-dev's: a key derived from the data dir's secret (``vera.local_secret``), issuer
  ``LOCAL_ISSUER``, audience ``LOCAL_AUDIENCE``, key id ``LOCAL_KEY_ID``: the API derives it
  from the secret, the gateway is given only the derived key.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import jwt

from vera.config import Settings
from vera.local_secret import local_token_key

KEY_ID_CLAIM = "vera_key_id"
# Local tokens come from the data dir's secret, not from an API key: nothing to revoke but
# the secret itself.
LOCAL_KEY_ID = "local"
LOCAL_ISSUER = "vera-local"
LOCAL_AUDIENCE = "vera-local-mcp"
LOCAL_ALGORITHM = "HS256"


@dataclass(frozen=True)
class TokenKey:
    """What signs and verifies the built-in tokens of one deployment."""

    secret: str
    algorithm: str
    issuer: str
    audience: str

    @classmethod
    def local(cls, derived_key: str) -> TokenKey:
        """local-dev's, from the key ``vera.local_secret.local_token_key`` derives."""
        return cls(derived_key, LOCAL_ALGORITHM, LOCAL_ISSUER, LOCAL_AUDIENCE)


@dataclass(frozen=True)
class MintedToken:
    token: str
    expires_at: datetime


def team_key(settings: Settings) -> TokenKey | None:
    """The team deployment's key, or None when built-in tokens are not configured."""
    mcp = settings.mcp
    if mcp.jwt_secret is None or not mcp.auth_issuer or not mcp.auth_audience:
        return None
    return TokenKey(
        mcp.jwt_secret.get_secret_value(), mcp.jwt_algorithm, mcp.auth_issuer, mcp.auth_audience
    )


def minting_key(settings: Settings) -> TokenKey | None:
    """The key the REST API mints with: local-dev's, derived from the data dir's secret it
    holds, else the team's; None when it can mint none."""
    if settings.auth_profile == "local-dev":
        secret = settings.api.local_secret
        return TokenKey.local(local_token_key(secret.get_secret_value())) if secret else None
    return team_key(settings)


def verifying_key(settings: Settings) -> TokenKey | None:
    """The key the gateway verifies built-in tokens with: local-dev's derived key (given to
    it, never the secret), else the team's; None when it verifies none."""
    if settings.auth_profile == "local-dev":
        derived = settings.mcp.local_token_key
        return TokenKey.local(derived.get_secret_value()) if derived else None
    return team_key(settings)


def mint(
    key: TokenKey,
    principal_id: str,
    scopes: Sequence[str],
    *,
    key_id: str,
    lifetime_seconds: int,
    now: float | None = None,
) -> MintedToken:
    """A token for ``principal_id`` granting ``scopes``, minted from the API key ``key_id``,
    ending ``lifetime_seconds`` from ``now``."""
    issued_at = int(time.time() if now is None else now)
    expires = issued_at + lifetime_seconds
    claims: dict[str, object] = {
        "sub": principal_id,
        "iss": key.issuer,
        "aud": key.audience,
        "scope": " ".join(scopes),
        "iat": issued_at,
        "exp": expires,
        "jti": secrets.token_hex(16),
        KEY_ID_CLAIM: key_id,
    }
    token = jwt.encode(claims, key.secret, algorithm=key.algorithm)
    return MintedToken(token, datetime.fromtimestamp(expires, UTC))
