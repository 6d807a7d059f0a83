"""``create_app`` and ``python -m vera.entrypoints.mcp.main`` as the supervisor runs them."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import httpx
import pytest
from harness import LOCAL_TOKEN_KEY, local_token
from starlette.applications import Starlette

from vera.config import ConfigError, McpSettings, ObservabilitySettings, Settings
from vera.entrypoints.mcp.main import create_app
from vera.stack.ports import free_port

SECRET = "s" * 32
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"
VERIFIED = {"jwt_secret": SECRET, "auth_issuer": ISSUER, "auth_audience": AUDIENCE}


def test_create_app_refuses_incomplete_verification():
    """The remote-authenticated profile starts only with verification that checks every
    claim: none at all outside local, or a secret without issuer and audience, is refused."""
    settings = Settings(environment="prod")
    assert settings.auth_profile == "remote-authenticated"
    with pytest.raises(ConfigError):
        create_app(settings)
    secret = Settings(environment="local", mcp=McpSettings(jwt_secret=SECRET))
    with pytest.raises(ConfigError):
        create_app(secret)


def test_create_app_serves_an_authenticated_profile_with_complete_verification():
    for environment in ("prod", "local"):
        settings = Settings(environment=environment, mcp=McpSettings(**VERIFIED))
        assert settings.auth_profile == "remote-authenticated"
        assert isinstance(create_app(settings), Starlette)


def test_create_app_reads_the_environment(monkeypatch):
    monkeypatch.setenv("VERA_ENVIRONMENT", "local")
    monkeypatch.setenv("VERA_MCP__TOOL_PROFILE", "advanced")
    monkeypatch.setenv("VERA_MCP__LOCAL_TOKEN_KEY", LOCAL_TOKEN_KEY)
    assert isinstance(create_app(), Starlette)
    monkeypatch.setenv("VERA_ENVIRONMENT", "staging")
    with pytest.raises(ConfigError):
        create_app()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERA_")}
    return {**env, "VERA_ENVIRONMENT": "local", "VERA_MCP__LOCAL_TOKEN_KEY": LOCAL_TOKEN_KEY,
            **extra}


async def _wait_for_health(
    http: httpx.AsyncClient, port: int, process: asyncio.subprocess.Process
) -> httpx.Response:
    """Polls /healthz until the process answers; a generous deadline, since a loaded machine
    can take a while to import and bind, and an early exit fails at once."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise AssertionError(f"gateway exited with {process.returncode}")
        try:
            return await http.get(f"http://127.0.0.1:{port}/healthz")
        except httpx.TransportError:
            await asyncio.sleep(0.05)
    raise AssertionError("gateway did not come up")


async def test_module_serves_healthz_and_stops_on_sigterm():
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vera.entrypoints.mcp.main",
        env=_env(VERA_MCP__PORT=str(port), VERA_OBSERVABILITY__MCP_METRICS_PORT="0"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with httpx.AsyncClient(timeout=1) as http:
            response = await _wait_for_health(http, port, process)
        assert response.status_code == 200
    finally:
        process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), 10)
    # uvicorn shuts down gracefully, then re-raises the signal it caught.
    assert process.returncode in (0, -signal.SIGTERM), stderr.decode()
    assert "GET /healthz" not in stderr.decode()  # no access log


async def test_module_refuses_to_start_outside_local_without_verification():
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vera.entrypoints.mcp.main",
        env=_env(VERA_ENVIRONMENT="prod"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "VERA_MCP__JWT_SECRET" in lines[0]


async def test_module_serves_outside_local_with_complete_verification():
    """The authenticated start the refusal above guards: prod with built-in JWT verification
    serves its health check, and a tool call without a token is answered 401."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "vera.entrypoints.mcp.main",
        env=_env(
            VERA_ENVIRONMENT="prod",
            VERA_MCP__PORT=str(port),
            VERA_MCP__JWT_SECRET=SECRET,
            VERA_MCP__AUTH_ISSUER=ISSUER,
            VERA_MCP__AUTH_AUDIENCE=AUDIENCE,
            VERA_OBSERVABILITY__MCP_METRICS_PORT="0",
        ),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with httpx.AsyncClient(timeout=1) as http:
            health = await _wait_for_health(http, port, process)
            assert health.status_code == 200
            anonymous = await http.post(
                f"http://127.0.0.1:{port}/mcp",
                json=INIT,
                headers={"accept": "application/json, text/event-stream"},
            )
            assert anonymous.status_code == 401
    finally:
        process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), 10)
    assert process.returncode in (0, -signal.SIGTERM), stderr.decode()


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


async def test_by_default_only_the_servers_own_origin_is_accepted():
    """A page on another local port (any dev server the developer runs) is refused; the
    server's own loopback origin, which the conformance suite's rebinding check sends
    with a valid Host, is accepted."""
    settings = Settings(
        environment="local",
        mcp=McpSettings(local_token_key=LOCAL_TOKEN_KEY, port=8080),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )
    app = create_app(settings)
    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json", "authorization": f"Bearer {local_token()}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
            for origin in ("http://localhost:3000", "http://127.0.0.1:5173",
                           "http://[::1]:8000", "http://localhost", "null"):
                response = await http.post("/mcp", json=INIT,
                                           headers={**headers, "origin": origin})
                assert response.status_code == 403, origin
            for origin in ("http://127.0.0.1:8080", "http://localhost:8080", None):
                extra = {"origin": origin} if origin else {}
                response = await http.post("/mcp", json=INIT, headers={**headers, **extra})
                assert response.status_code == 200, origin
