"""Settings come from VERA_* variables; bad values fail naming the variable."""

from __future__ import annotations

import pytest

from vera.config import ConfigError, load_settings


def test_nested_variables_and_json_lists(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VERA_MCP__PORT", "9000")
    monkeypatch.setenv("VERA_MCP__ALLOWED_HOSTS", '["mcp.example:*"]')
    monkeypatch.setenv("VERA_OBSERVABILITY__MCP_METRICS_PORT", "9200")
    monkeypatch.setenv("VERA_MCP__QUOTA_ENABLED", "false")
    settings = load_settings()
    assert settings.mcp.port == 9000
    assert settings.mcp.allowed_hosts == ["mcp.example:*"]
    assert settings.observability.mcp_metrics_port == 9200
    assert settings.mcp.quota_enabled is False


@pytest.mark.parametrize(("name", "value"), [
    ("VERA_MCP__PORT", "eighty"),
    ("VERA_MCP__TOOL_PROFILE", "everything"),
    ("VERA_MCP__QUOTA_CONTEXT_PER_MINUTE", "0"),
    ("VERA_ENVIRONMENT", "moon"),
    ("VERA_KNOWLEDGE__STALE_SOURCE_DAYS", "0"),
    ("VERA_KNOWLEDGE__STALE_SOURCE_DAYS", "half a year"),
])
def test_bad_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"{name}:")


def test_the_stale_source_threshold_is_a_setting(monkeypatch: pytest.MonkeyPatch):
    assert load_settings().knowledge.stale_source_days == 180
    monkeypatch.setenv("VERA_KNOWLEDGE__STALE_SOURCE_DAYS", "30")
    assert load_settings().knowledge.stale_source_days == 30


def test_local_profile_binds_loopback_and_auth_config_leaves_it(monkeypatch: pytest.MonkeyPatch):
    settings = load_settings()
    assert settings.auth_profile == "local-dev"
    assert settings.mcp_bind_host == "127.0.0.1"
    monkeypatch.setenv("VERA_MCP__JWT_SECRET", "x" * 32)
    assert load_settings().auth_profile == "remote-authenticated"


def test_default_origins_are_each_listeners_own_exactly(monkeypatch: pytest.MonkeyPatch):
    settings = load_settings()
    assert settings.mcp.allowed_origins == [
        "http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"]
    assert settings.api.allowed_origins == [
        "http://127.0.0.1:8081", "http://localhost:8081", "http://[::1]:8081"]
    assert settings.api.allowed_hosts == settings.mcp.allowed_hosts
    monkeypatch.setenv("VERA_MCP__PORT", "9000")
    monkeypatch.setenv("VERA_API__PORT", "9001")
    settings = load_settings()
    assert settings.mcp.allowed_origins[0] == "http://127.0.0.1:9000"
    assert settings.api.allowed_origins[0] == "http://127.0.0.1:9001"


def test_configured_origins_replace_the_default_exactly(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VERA_API__ALLOWED_ORIGINS", '["https://console.example"]')
    monkeypatch.setenv("VERA_API__ALLOWED_HOSTS", '["vera.example"]')
    monkeypatch.setenv("VERA_MCP__ALLOWED_ORIGINS", "[]")
    settings = load_settings()
    assert settings.api.allowed_origins == ["https://console.example"]
    assert settings.api.allowed_hosts == ["vera.example"]
    assert settings.mcp.allowed_origins == []


@pytest.mark.parametrize("name", ["VERA_MCP__ALLOWED_ORIGINS", "VERA_API__ALLOWED_ORIGINS"])
def test_an_origin_port_wildcard_is_refused(monkeypatch: pytest.MonkeyPatch, name: str):
    monkeypatch.setenv(name, '["http://localhost:*"]')
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"{name}:")


def test_the_model_cache_is_in_the_data_dir_unless_set(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.delenv("VERA_RETRIEVAL__MODEL_CACHE_DIR", raising=False)
    monkeypatch.setenv("VERA_DATA_DIR", str(tmp_path / "data"))
    assert load_settings().model_cache_dir == tmp_path / "data" / "models"
    monkeypatch.setenv("VERA_RETRIEVAL__MODEL_CACHE_DIR", str(tmp_path / "shared"))
    assert load_settings().model_cache_dir == tmp_path / "shared"
