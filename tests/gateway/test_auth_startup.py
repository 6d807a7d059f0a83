"""Startup rules of the MCP process: no unauthenticated serving outside ``local``,
no verification that cannot check issuer and audience, and the local-dev profile on a
loopback address only unless the operator overrides it, loudly."""

from __future__ import annotations

import logging

import pytest
from harness import LOCAL_TOKEN_KEY
from starlette.applications import Starlette

from vera.config import ConfigError, McpSettings, Settings
from vera.entrypoints.mcp.main import UnsupportedAuthProfile, create_app

SECRET = "built-in-test-secret-0123456789abcdef"
BUILTIN = {"jwt_secret": SECRET, "auth_issuer": "https://auth.test", "auth_audience": "https://mcp"}


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_non_local_environments_refuse_without_verification(environment):
    with pytest.raises(UnsupportedAuthProfile):
        create_app(Settings(environment=environment))


@pytest.mark.parametrize("environment", ["local", "dev", "staging", "prod"])
def test_builtin_jwt_serves_every_environment(environment):
    settings = Settings(environment=environment, mcp=McpSettings(**BUILTIN))
    assert settings.auth_profile == "remote-authenticated"
    assert isinstance(create_app(settings), Starlette)


@pytest.mark.parametrize(
    "mcp",
    [
        {**BUILTIN, "auth_audience": None},  # no audience binding
        {**BUILTIN, "auth_issuer": None},  # no issuer to check
        {**BUILTIN, "jwt_secret": "short"},  # guessable secret
        {"auth_audience": "https://mcp", "oauth_signing_key": "not a pem"},
        {"auth_audience": "https://mcp", "oauth_jwks_url": "https://idp/jwks"},  # no issuer
        {
            "auth_audience": "https://mcp",
            "oauth_issuer": "https://idp",
            "oauth_jwks_url": "https://idp/jwks",
            "oauth_algorithms": ["HS256"],  # symmetric: key confusion
        },
        {
            "auth_audience": "https://mcp",
            "oauth_issuer": "https://idp",
            "oauth_jwks_url": "https://idp/jwks",
            "oauth_algorithms": ["none"],
        },
    ],
)
def test_verification_that_cannot_check_every_claim_is_refused(mcp):
    with pytest.raises(ConfigError):
        create_app(Settings(environment="prod", mcp=McpSettings(**mcp)))


def test_external_oauth_alone_is_enough():
    settings = Settings(
        environment="prod",
        mcp=McpSettings(
            auth_audience="https://mcp",
            oauth_issuer="https://idp",
            oauth_jwks_url="https://idp/jwks",
            oauth_algorithms=["RS256", "ES256"],
        ),
    )
    assert isinstance(create_app(settings), Starlette)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_local_dev_binds_loopback(host):
    assert isinstance(create_app(Settings(environment="local", mcp=McpSettings(
        local_token_key=LOCAL_TOKEN_KEY, host=host))),
                      Starlette)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "mcp.example.com"])
def test_local_dev_refuses_a_non_loopback_address(host):
    with pytest.raises(UnsupportedAuthProfile):
        create_app(Settings(environment="local", mcp=McpSettings(
            local_token_key=LOCAL_TOKEN_KEY, host=host)))


def test_the_non_loopback_override_is_explicit_and_loud(caplog):
    caplog.set_level(logging.WARNING, logger="vera.entrypoints.loopback")
    settings = Settings(
        environment="local",
        mcp=McpSettings(
            local_token_key=LOCAL_TOKEN_KEY,
            host="0.0.0.0",
            allow_unauthenticated_non_loopback=True,
        ),
    )
    assert isinstance(create_app(settings), Starlette)
    [record] = [r for r in caplog.records if r.name == "vera.entrypoints.loopback"]
    assert record.levelno == logging.WARNING
    assert "VERA_MCP__ALLOW_UNAUTHENTICATED_NON_LOOPBACK" in record.getMessage()


def test_the_override_reads_from_the_environment(monkeypatch):
    monkeypatch.setenv("VERA_ENVIRONMENT", "local")
    monkeypatch.setenv("VERA_MCP__HOST", "0.0.0.0")
    monkeypatch.setenv("VERA_MCP__LOCAL_TOKEN_KEY", LOCAL_TOKEN_KEY)
    with pytest.raises(UnsupportedAuthProfile):
        create_app()
    monkeypatch.setenv("VERA_MCP__ALLOW_UNAUTHENTICATED_NON_LOOPBACK", "true")
    assert isinstance(create_app(), Starlette)


EXTERNAL = {"auth_audience": "https://mcp", "oauth_issuer": "https://idp"}


@pytest.mark.parametrize(
    ("url", "variable"),
    [
        ("http://idp.example.com/jwks", "VERA_MCP__OAUTH_JWKS_URL"),  # keys from the network
        ("http://10.0.0.7/jwks", "VERA_MCP__OAUTH_JWKS_URL"),
        ("ftp://idp.example.com/jwks", "VERA_MCP__OAUTH_JWKS_URL"),
        ("https:///jwks", "VERA_MCP__OAUTH_JWKS_URL"),  # no host
        ("http://127.0.0.1:8000/jwks", "VERA_MCP__OAUTH_JWKS_ALLOW_INSECURE_LOOPBACK"),
        ("http://localhost/jwks", "VERA_MCP__OAUTH_JWKS_ALLOW_INSECURE_LOOPBACK"),
    ],
)
def test_a_jwks_url_without_tls_is_refused_naming_the_variable(url, variable):
    with pytest.raises(ConfigError) as refused:
        create_app(Settings(environment="prod", mcp=McpSettings(**EXTERNAL, oauth_jwks_url=url)))
    assert str(refused.value).startswith(f"{variable}:")


def test_plain_http_loopback_jwks_only_behind_the_test_setting():
    for url in ("http://127.0.0.1:8000/jwks", "http://[::1]/jwks", "http://localhost/jwks"):
        mcp = McpSettings(**EXTERNAL, oauth_jwks_url=url, oauth_jwks_allow_insecure_loopback=True)
        assert isinstance(create_app(Settings(environment="prod", mcp=mcp)), Starlette)
    # The setting never opens plain http to a non-loopback host.
    mcp = McpSettings(
        **EXTERNAL,
        oauth_jwks_url="http://idp.example.com/jwks",
        oauth_jwks_allow_insecure_loopback=True,
    )
    with pytest.raises(ConfigError, match=r"^VERA_MCP__OAUTH_JWKS_URL:"):
        create_app(Settings(environment="prod", mcp=mcp))


@pytest.mark.parametrize(
    ("missing", "variable"),
    [("auth_issuer", "VERA_MCP__AUTH_ISSUER"), ("auth_audience", "VERA_MCP__AUTH_AUDIENCE")],
)
@pytest.mark.parametrize("environment", ["local", "prod"])
def test_a_jwt_secret_without_its_issuer_or_audience_names_the_missing_one(
    missing, variable, environment
):
    # A restore started with the token key alone (docs/deploy.md) was told to set the key.
    mcp = McpSettings(**{**BUILTIN, missing: None})
    with pytest.raises(ConfigError) as refused:
        create_app(Settings(environment=environment, mcp=mcp))
    assert str(refused.value).startswith(f"{variable}:")
