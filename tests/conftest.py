"""Shared fixtures: one embedded PostgreSQL per test session, a fresh database per use,
and the REST API in process (httpx over ASGI) against a real identity service."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
from harness import LOCAL_SECRET

from vera.api.app import build_app
from vera.config import Settings
from vera.db.embedded import EmbeddedPostgres
from vera.services.identity import server as identity_server


def pytest_configure(config: pytest.Config) -> None:
    # Every stack and retrieval service the suite starts (each in a fresh data dir) shares
    # one ONNX export of MiniLM, made once (~15 s) and kept in pytest's cache directory,
    # instead of making it again in each data dir. Spawned processes inherit it.
    if config.cache is not None:
        os.environ.setdefault(
            "VERA_RETRIEVAL__MODEL_CACHE_DIR", str(config.cache.mkdir("vera-models")))


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    with tempfile.TemporaryDirectory(prefix="vera-test-pg-") as tmp:
        pg = EmbeddedPostgres(Path(tmp))
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()


@pytest.fixture
async def pg_dsn(embedded_pg: EmbeddedPostgres) -> AsyncIterator[str]:
    """A DSN to a brand-new empty database, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(embedded_pg.admin_dsn())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield embedded_pg.dsn(name)
    admin = await asyncpg.connect(embedded_pg.admin_dsn())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"

# What a local client dials: the REST API answers only the Hosts it serves (loopback here).
API_BASE_URL = "http://127.0.0.1:8081"
ApiFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def identity_address(pg_dsn: str) -> AsyncIterator[str]:
    hosted = await identity_server.create(Settings(database={"dsn": pg_dsn}), "127.0.0.1:0")
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
        api={"open_registration": open_registration, "local_secret": LOCAL_SECRET},
        services={"identity": identity_address},
    )


@pytest.fixture
def make_api(identity_address: str) -> ApiFactory:
    @asynccontextmanager
    async def factory(**kwargs) -> AsyncIterator[httpx.AsyncClient]:
        app = build_app(api_settings(identity_address, **kwargs))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=API_BASE_URL) as client:
                yield client

    return factory


@pytest.fixture
async def api(make_api: ApiFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_api() as client:
        yield client
