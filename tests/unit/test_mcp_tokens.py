"""The built-in MCP token's claims, the local signing key's derivation, and the gateway's
cached verdict on a token's key."""

from __future__ import annotations

from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from vera.config import Settings
from vera.gateway.credentials import CredentialCheck, CredentialRefused
from vera.identity.v1 import identity_pb2
from vera.local_secret import TOKEN_KEY_INFO, local_token_key
from vera.mcp_tokens import KEY_ID_CLAIM, TokenKey, mint

SECRET = "local-secret-of-a-data-dir-0123456789abcdef"


def test_the_local_token_key_is_rfc5869_hkdf_of_the_secret_and_not_the_secret() -> None:
    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=TOKEN_KEY_INFO)
    assert local_token_key(SECRET) == expected.derive(SECRET.encode()).hex()
    assert SECRET not in local_token_key(SECRET)
    assert local_token_key(SECRET) != local_token_key(SECRET + "x")


def test_a_minted_token_ends_and_names_its_key() -> None:
    key = TokenKey.local(local_token_key(SECRET))
    minted = mint(key, "p-1", ["memory:read"], key_id="local", lifetime_seconds=120, now=1000)
    claims = jwt.decode(minted.token, key.secret, algorithms=["HS256"], audience=key.audience,
                        options={"verify_exp": False})
    assert (claims["iat"], claims["exp"], claims[KEY_ID_CLAIM]) == (1000, 1120, "local")
    assert minted.expires_at.timestamp() == 1120


class Identity:
    """CheckCredential's answers, counted."""

    def __init__(self) -> None:
        self.state = identity_pb2.CREDENTIAL_STATE_ACTIVE
        self.calls: list[Any] = []

    async def CheckCredential(self, request: Any, timeout: float) -> Any:
        self.calls.append((request, timeout))
        return identity_pb2.CheckCredentialResponse(
            state=self.state, principal=identity_pb2.Principal(principal_id=request.principal_id))


class Backends:
    def __init__(self) -> None:
        self.identity = Identity()


async def test_a_verdict_is_reused_within_the_window_then_asked_again() -> None:
    now = [0.0]
    check = CredentialCheck(Settings(environment="prod", mcp={"revocation_cache_seconds": 5}),
                            deadline_seconds=2.0, clock=lambda: now[0])
    backends: Any = Backends()
    assert await check.principal("p-1", "k-1", backends) == "p-1"
    assert await check.principal("p-1", "k-1", backends) == "p-1"
    assert len(backends.identity.calls) == 1
    assert backends.identity.calls[0][1] == 2.0  # under the RPC deadline
    backends.identity.state = identity_pb2.CREDENTIAL_STATE_KEY_REVOKED
    now[0] = 4.9
    assert await check.principal("p-1", "k-1", backends) == "p-1"  # still the cached verdict
    now[0] = 5.0
    with pytest.raises(CredentialRefused) as refused:
        await check.principal("p-1", "k-1", backends)
    assert refused.value.reason == "key_revoked"
    backends.identity.state = identity_pb2.CREDENTIAL_STATE_PRINCIPAL_DISABLED
    with pytest.raises(CredentialRefused) as refused:
        await check.principal("p-1", "k-2", backends)
    assert refused.value.reason == "principal_disabled"


async def test_a_team_gateway_never_takes_the_local_key_id_on_trust() -> None:
    check = CredentialCheck(Settings(environment="prod"), deadline_seconds=2.0)
    backends: Any = Backends()
    backends.identity.state = identity_pb2.CREDENTIAL_STATE_KEY_REVOKED
    with pytest.raises(CredentialRefused):
        await check.principal("p-1", "local", backends)
    assert len(backends.identity.calls) == 1
