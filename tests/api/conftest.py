"""The REST API in process in either profile, as the request-admission tests use it: the real
app and identity service, an authenticator that counts how far requests got, and identity's
row counts to show that a refused request changed nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
from harness import LOCAL_SECRET
from starlette.requests import Request

from vera.api.app import build_app
from vera.api.auth import RestAuthenticator, RestCaller, default_authenticator
from vera.config import Settings
from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.backends import Backends
from vera.rpc.client import open_channel

SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
API_BASE = "http://127.0.0.1:8081"  # what a local client dials: Host 127.0.0.1:8081
PROFILES = ["local-dev", "remote-authenticated"]


class CountingAuthenticator:
    """The real authenticator, counting how often a request got as far as it."""

    def __init__(self, inner: RestAuthenticator) -> None:
        self.inner = inner
        self.calls = 0

    async def authenticate(self, request: Request, backends: Backends) -> RestCaller:
        self.calls += 1
        return await self.inner.authenticate(request, backends)


@dataclass
class Api:
    client: httpx.AsyncClient
    authenticator: CountingAuthenticator
    credentials: dict[str, str]  # what the victim's own client would send


def profile_settings(profile: str, identity_address: str, **api: object) -> Settings:
    services = {"identity": identity_address}
    if profile == "local-dev":
        return Settings(environment="local", api={"local_secret": LOCAL_SECRET, **api},
                        services=services)
    return Settings(environment="dev", mcp={"jwt_secret": SECRET}, api=api, services=services)


async def admin_key(identity_address: str) -> str:
    channel = open_channel(identity_address, deadline_seconds=10)
    try:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        user = await stub.CreateUser(pb.CreateUserRequest(display_name="root", admin=True))
        key = await stub.CreateApiKey(
            pb.CreateApiKeyRequest(principal_id=user.principal.principal_id))
        return key.api_key
    finally:
        await channel.close()


@pytest.fixture
def new_admin_key(identity_address: str) -> Callable[[], Awaitable[str]]:
    """Makes an administrator and returns a fresh API key of theirs."""
    return lambda: admin_key(identity_address)


RestFactory = Callable[..., AbstractAsyncContextManager[Api]]


@pytest.fixture
def make_rest(identity_address: str) -> RestFactory:
    """``make_rest(profile, **api_settings)``: the app in that profile; in the authenticated
    one the victim's client holds an administrator's API key."""

    @asynccontextmanager
    async def factory(profile: str, **api: object) -> AsyncIterator[Api]:
        settings = profile_settings(profile, identity_address, **api)
        assert settings.auth_profile == profile
        credentials = {"authorization": f"Bearer {LOCAL_SECRET}"}
        if profile == "remote-authenticated":
            credentials = {"authorization": f"Bearer {await admin_key(identity_address)}"}
        authenticator = CountingAuthenticator(default_authenticator(settings))
        app = build_app(settings, authenticator=authenticator)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=API_BASE) as client:
                yield Api(client, authenticator, credentials)

    return factory


@pytest.fixture(params=PROFILES)
async def rest(request: pytest.FixtureRequest, make_rest: RestFactory) -> AsyncIterator[Api]:
    async with make_rest(request.param) as api:
        yield api


@pytest.fixture
def identity_rows(pg_dsn: str) -> Callable[[], Awaitable[dict[str, int]]]:
    """Row counts of identity's principals, API keys and workspaces."""

    async def count() -> dict[str, int]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return {table: await conn.fetchval(f"SELECT count(*) FROM identity.{table}")
                    for table in ("principals", "api_keys", "workspaces")}
        finally:
            await conn.close()

    return count
