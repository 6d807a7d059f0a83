"""The local-dev principal both front ends act as: ensured in identity exactly once."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from vera.api.auth import LocalDevRestAuthenticator
from vera.config import Settings
from vera.gateway.credentials import KEY_REVOKED, CredentialCheck, CredentialRefused
from vera.local_principal import LocalPrincipal
from vera.mcp_tokens import LOCAL_KEY_ID

PRINCIPAL = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


class Identity:
    """Records EnsureLocalPrincipal; yields once per call so first calls can race."""

    def __init__(self) -> None:
        self.ensured: list[str] = []

    async def EnsureLocalPrincipal(self, request, timeout=None):
        await asyncio.sleep(0)
        self.ensured.append(request.principal_id)


def settings() -> Settings:
    return Settings(mcp={"local_principal_id": PRINCIPAL})


async def test_racing_first_calls_ensure_the_principal_once() -> None:
    identity = Identity()
    backends = SimpleNamespace(identity=identity)
    local = LocalPrincipal(settings())
    ids = await asyncio.gather(*(local.ensure(backends) for _ in range(5)))
    assert ids == [str(PRINCIPAL)] * 5
    assert identity.ensured == [str(PRINCIPAL)]
    await local.ensure(backends)
    assert identity.ensured == [str(PRINCIPAL)]


async def test_both_front_ends_act_as_the_one_local_principal() -> None:
    identity = Identity()
    backends = SimpleNamespace(identity=identity)
    rest = await LocalDevRestAuthenticator(settings()).local_caller(backends)
    # The gateway's: whom a local MCP token (minted for the data dir's secret) acts as.
    mcp = await CredentialCheck(settings(), deadline_seconds=1).principal(
        str(PRINCIPAL), LOCAL_KEY_ID, backends)
    assert rest.principal_id == mcp == str(PRINCIPAL)
    assert (rest.auth_profile, rest.admin) == ("local-dev", True)
    assert identity.ensured == [str(PRINCIPAL), str(PRINCIPAL)]


async def test_a_local_token_for_another_principal_is_refused() -> None:
    backends = SimpleNamespace(identity=Identity())
    with pytest.raises(CredentialRefused) as refused:
        await CredentialCheck(settings(), deadline_seconds=1).principal(
            str(uuid.uuid4()), LOCAL_KEY_ID, backends)
    assert refused.value.reason == KEY_REVOKED
    assert backends.identity.ensured == []
