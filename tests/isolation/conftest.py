"""Isolation through the real identity service and the REST app (httpx over ASGI)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import httpx
import pytest

from vera.api.app import build_app
from vera.config import Settings
from vera.services.identity import server

SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"

ApiFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def identity_address(pg_dsn: str) -> AsyncIterator[str]:
    hosted = await server.create(Settings(database={"dsn": pg_dsn}), "127.0.0.1:0")
    await hosted.running.server.start()
    try:
        yield f"127.0.0.1:{hosted.running.port}"
    finally:
        await hosted.running.stop(grace=0)
        await hosted.aclose()


def api_settings(identity_address: str, *, jwt: bool = True, open_registration: bool = True,
                 environment: str = "dev") -> Settings:
    mcp = {"jwt_secret": SECRET, "auth_issuer": ISSUER, "auth_audience": AUDIENCE} if jwt else {}
    return Settings(
        environment=environment,
        mcp=mcp,
        api={"open_registration": open_registration},
        services={"identity": identity_address},
    )


@pytest.fixture
def make_api(identity_address: str) -> ApiFactory:
    @asynccontextmanager
    async def factory(**kwargs) -> AsyncIterator[httpx.AsyncClient]:
        app = build_app(api_settings(identity_address, **kwargs))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                yield client

    return factory


@pytest.fixture
async def api(make_api: ApiFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_api() as client:
        yield client


@pytest.fixture(scope="session")
async def embedder():
    from vera.services.retrieval.embedding import MiniLMEmbedder

    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()


@pytest.fixture
async def stack(pg_dsn: str, identity_address: str, tmp_path, embedder):
    from isolation_stack import full_stack

    async with full_stack(pg_dsn, identity_address, tmp_path / "data", embedder) as running:
        yield running
