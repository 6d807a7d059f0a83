"""The REST API process's startup rule, the same as the MCP process's: the unauthenticated
local-dev profile (every caller an administrator) binds only a loopback address unless
``VERA_API__ALLOW_UNAUTHENTICATED_NON_LOOPBACK=true``, which is logged loudly."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import pytest
from starlette.applications import Starlette

from vera.config import ApiSettings, ConfigError, McpSettings, Settings
from vera.entrypoints.api.main import create_app

SECRET = "built-in-test-secret-0123456789abcdef"
LOCAL = ApiSettings(local_secret="local-secret-of-the-test-data-dir-0123456789abcdef")


def local_api(**api: object) -> ApiSettings:
    return LOCAL.model_copy(update=api)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_local_dev_api_binds_loopback(host):
    assert isinstance(create_app(Settings(environment="local", api=local_api(host=host))),
                      Starlette)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "api.example.com"])
def test_local_dev_api_refuses_a_non_loopback_address(host):
    with pytest.raises(ConfigError) as caught:
        create_app(Settings(environment="local", api=local_api(host=host)))
    assert str(caught.value).startswith("VERA_API__HOST:")


def test_the_mcp_override_does_not_open_the_api():
    settings = Settings(
        environment="local",
        mcp=McpSettings(host="0.0.0.0", allow_unauthenticated_non_loopback=True),
        api=local_api(host="0.0.0.0"),
    )
    with pytest.raises(ConfigError):
        create_app(settings)


def test_the_api_override_is_explicit_and_loud(caplog):
    caplog.set_level(logging.WARNING)
    settings = Settings(
        environment="local",
        api=local_api(host="0.0.0.0", allow_unauthenticated_non_loopback=True),
    )
    assert isinstance(create_app(settings), Starlette)
    [record] = [r for r in caplog.records
                if "VERA_API__ALLOW_UNAUTHENTICATED_NON_LOOPBACK" in r.getMessage()]
    assert record.levelno == logging.WARNING


def test_an_authenticated_api_binds_any_address():
    settings = Settings(environment="prod", mcp=McpSettings(jwt_secret=SECRET))
    assert settings.api_bind_host == "0.0.0.0"
    assert isinstance(create_app(settings), Starlette)


def test_the_override_reads_from_the_environment(monkeypatch):
    monkeypatch.setenv("VERA_ENVIRONMENT", "local")
    monkeypatch.setenv("VERA_API__LOCAL_SECRET", LOCAL.local_secret.get_secret_value())
    monkeypatch.setenv("VERA_API__HOST", "0.0.0.0")
    with pytest.raises(ConfigError):
        create_app()
    monkeypatch.setenv("VERA_API__ALLOW_UNAUTHENTICATED_NON_LOOPBACK", "true")
    assert isinstance(create_app(), Starlette)


async def test_the_module_refuses_to_start_naming_the_variable():
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERA_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vera.entrypoints.api.main",
        env={**env, "VERA_ENVIRONMENT": "local", "VERA_API__HOST": "0.0.0.0",
             "VERA_API__LOCAL_SECRET": LOCAL.local_secret.get_secret_value()},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vera api: VERA_API__HOST:")


def test_a_local_dev_api_without_the_data_dirs_secret_does_not_start():
    with pytest.raises(ConfigError) as caught:
        create_app(Settings(environment="local"))
    assert str(caught.value).startswith("VERA_API__LOCAL_SECRET:")
