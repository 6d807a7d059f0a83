"""The comment-keeping editors: an insert and the matching remove give back the original
bytes, and anything that cannot be edited safely raises instead of writing."""

from __future__ import annotations

import pytest

from vera.integrations import editors
from vera.integrations.editors import UnsafeEdit, fingerprint

SERVER = {"type": "http", "url": "http://127.0.0.1:8080/mcp"}
JSON_CASES = [
    "",
    "{}\n",
    "{\n}\n",
    '{ "a": 1 }',
    '{ "a": 1, }',
    '{\n  // team\n  "a": 1, // trailing comma and a comment\n}\n',
    '{\n  "a": 1 /* block */\n}\n',
    '{\n    "mcpServers": {\n        "docs": {"type": "stdio", "command": "x"}\n    }\n}\n',
    '{\n  "mcpServers": {}\n}\n',
]


@pytest.mark.parametrize("text", JSON_CASES)
@pytest.mark.parametrize("path", [("mcpServers", "vera"), ("vera",)])
def test_json_insert_then_remove_is_byte_identical(text, path):
    edited, owned = editors.json_set(text, path, SERVER)
    assert editors.get_json(editors.parse_json(edited), path) == SERVER
    restored = editors.json_delete(edited, owned)
    assert restored == text or (not text and editors.parse_json(restored) == {})


def test_json_array_item_round_trip():
    text = '{\n  "hooks": {\n    "SessionStart": [\n      {"matcher": "team"}\n    ]\n  }\n}\n'
    item = {"matcher": "startup", "hooks": []}
    edited = editors.json_append(text, ("hooks", "SessionStart"), item)
    assert editors.parse_json(edited)["hooks"]["SessionStart"][0] == {"matcher": "team"}
    assert editors.json_remove_item(edited, ("hooks", "SessionStart"), fingerprint(item)) == text


TOML_CASES = ["", "# only a comment\n",
              '# head\nmodel = "x" # inline\n\n[mcp_servers.docs]\nurl = "o" # docs\n']


@pytest.mark.parametrize("text", TOML_CASES)
def test_toml_insert_then_remove_is_byte_identical(text):
    edited, owned = editors.toml_set_table(text, ("mcp_servers", "vera"), {"url": "u"})
    assert edited.startswith(text.rstrip("\n"))
    assert editors.parse_toml(edited)["mcp_servers"]["vera"] == {"url": "u"}
    assert editors.toml_delete(edited, owned) == text


@pytest.mark.parametrize("text", [*TOML_CASES, "[mcp_servers.docs]\nurl = \"o\"\n",
                                  "\n[a]\nx = 1\n", "# c\n[a]\nx = 1\n"])
def test_toml_top_level_key_insert_then_remove_is_byte_identical(text):
    edited = editors.toml_set_key(text, ("mcp_optional_startup_grace_ms",), 10_000)
    assert editors.parse_toml(edited)["mcp_optional_startup_grace_ms"] == 10_000
    assert editors.toml_delete(edited, ("mcp_optional_startup_grace_ms",)) == text


@pytest.mark.parametrize("text", ['{"a": ', "[1, 2]", '{"mcpServers": []}'])
def test_unsafe_json_raises(text):
    with pytest.raises(UnsafeEdit):
        editors.json_set(text, ("mcpServers", "vera"), SERVER)


def test_unsafe_toml_raises():
    with pytest.raises(UnsafeEdit):
        editors.toml_set_table('mcp_servers = "x"\n', ("mcp_servers", "vera"), {"url": "u"})


def test_unparseable_config_stops_with_a_manual_patch(repo, vera):
    from standin import StandIn

    (repo / "opencode.jsonc").write_text('{\n  "mcp": { // broken\n')
    with StandIn() as standin:
        done = vera("connect", "opencode", "--api-url", standin.url, "--mcp-url",
                    standin.mcp_url, "--yes")
    assert done.returncode == 3 and "manual patch" in done.stderr
    assert '"vera"' in done.stderr  # the patch to apply by hand
    assert sorted(p.name for p in repo.iterdir()) == [".git", "opencode.jsonc"]
