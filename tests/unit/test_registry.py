"""The MCP registry entry: the registry's published constraints on a remote server, the
release's own version and summary, and no credential in it."""

from __future__ import annotations

import json
from importlib.metadata import metadata

import jsonschema
import pytest

from vera.registry import main, server_json

# The registry's server.json rules a remote-only entry must meet (its server.schema.json:
# Server's required fields, name pattern and description length; StreamableHttpTransport;
# KeyValueInput headers).
REMOTE_ENTRY = {
    "type": "object",
    "required": ["$schema", "name", "description", "version", "remotes"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$",
                 "minLength": 3, "maxLength": 200},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "version": {"type": "string", "maxLength": 255, "not": {"const": "latest"}},
        "remotes": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["type", "url"],
            "properties": {
                "type": {"enum": ["streamable-http", "sse"]},
                "url": {"type": "string"},
                "headers": {"type": "array", "items": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "isSecret": {"type": "boolean"},
                                   "isRequired": {"type": "boolean"},
                                   "value": {"type": "string"}}}},
            }}},
    },
}


def test_the_entry_meets_the_registry_schema_and_carries_the_release() -> None:
    entry = server_json("com.example/vera", "https://vera.example.com/mcp")
    jsonschema.validate(entry, REMOTE_ENTRY)
    release = metadata("vera-memory")
    assert entry["version"] == release["Version"]
    assert entry["description"] == release["Summary"]
    [remote] = entry["remotes"]
    assert remote == {**remote, "type": "streamable-http", "url": "https://vera.example.com/mcp"}
    [header] = remote["headers"]
    assert header["name"] == "Authorization" and header["isSecret"] is True
    assert header["value"] == "Bearer {token}"


@pytest.mark.parametrize(("name", "url"), [
    ("vera", "https://vera.example.com/mcp"),
    ("com.example/vera", "http://vera.example.com/mcp"),
])
def test_a_bad_name_or_a_plain_http_url_is_refused(name: str, url: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--name", name, "--url", url]) == 2
    assert "vera.registry:" in capsys.readouterr().err


def test_main_prints_the_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--name", "com.example/vera", "--url", "https://vera.example.com/mcp"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "com.example/vera"
