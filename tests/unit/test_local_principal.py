"""The local-dev principal both front ends act as: ensured in identity exactly once."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from vera.api.auth import LocalDevRestAuthenticator
from vera.config import Settings
from vera.gateway.auth import LocalDevAuthenticator
from vera.local_principal import LocalPrincipal

PRINCIPAL = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


class Identity:
    """Records EnsureLocalPrincipal; yields once per call so first calls can race."""

    def __init__(self) -> None:
        self.ensured: list[str] = []

    async def EnsureLocalPrincipal(self, request):
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
    mcp = await LocalDevAuthenticator(settings()).authenticate(None, backends)
    assert rest.principal_id == mcp.principal_id == str(PRINCIPAL)
    assert (rest.auth_profile, rest.admin) == ("local-dev", True)
    assert mcp.auth_profile == "local-dev"
    assert identity.ensured == [str(PRINCIPAL), str(PRINCIPAL)]
