"""Several runtimes in one repository: each has its own credential (its own per-connection
key, token files and scopes) and its own files, so connecting, reconnecting or disconnecting
one never changes another's rights or files; and a repository connected with the shared
layout every runtime used before (one `.vera/mcp-token`, one `.agents/skills/vera/SKILL.md`)
is migrated by the next connect, reported by doctor and cleaned up by disconnect.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, CONNECTION_KEY, StandIn

from vera import cli
from vera.integrations import (
    artifacts,
    commands,
    connect,
    credentials,
    disconnect,
    doctor,
)
from vera.integrations.artifacts import Artifact, hook_source, plugin_source
from vera.integrations.contract import credential_scopes, save_mode
from vera.integrations.ownership import SHARED, credential_files, read_record
from vera.integrations.runtimes import claude_code, codex, opencode
from vera.integrations.skill import render_skill

TOKEN = "eyJ.side-by-side.signature"


def run(vera, standin: StandIn, runtime: str, *extra: str, key: bool = False):
    return vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes", *(["--api-key-stdin"] if key else []), *extra,
                stdin=API_KEY + "\n" if key else None)


def snapshot(repo: Path, *prefixes: str) -> dict[str, str]:
    return {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(repo.rglob("*")) if p.is_file()
            and str(p.relative_to(repo)).startswith(prefixes)}


def mint_requests(standin: StandIn) -> list[dict[str, Any]]:
    return [r for r in standin.requests if r["path"] == "/identity/mcp-token"]


CLAUDE_FILES = (".claude/", ".mcp.json", ".vera/claude-code/")


def test_a_second_runtime_gets_its_own_key_and_scopes_and_leaves_the_first_alone(
        repo, vera, home_env):
    with StandIn(auth=TOKEN) as standin:
        first = run(vera, standin, "claude-code", key=True)
        assert first.returncode == 0, first.stderr
        before = snapshot(repo, *CLAUDE_FILES)
        standin.requests.clear()
        # No key typed: the first runtime's key makes OpenCode a key of its own.
        second = run(vera, standin, "opencode", "--save-mode", "off")
        assert second.returncode == 0, second.stderr
        [made] = [r for r in standin.requests if r["path"] == "/identity/api-keys"]
        assert made["headers"]["Authorization"] == f"Bearer {CONNECTION_KEY}"
        [own_key] = [k for k in standin.issued.values() if k != CONNECTION_KEY]
        [mint] = mint_requests(standin)
        assert mint["headers"]["Authorization"] == f"Bearer {own_key}"
        assert mint["body"]["scopes"] == list(credential_scopes("opencode", "off"))
        assert snapshot(repo, *CLAUDE_FILES) == before
        state = Path(home_env["HOME"]) / ".local/state/vera" / credentials.FOLDER
        assert sorted(p.name.split(".", 1)[1] for p in state.iterdir()) == [
            "claude-code.json", "opencode.json"]
        assert vera("disconnect", "opencode", "--yes").returncode == 0
        assert standin.revoked == {own_key}  # OpenCode's key alone
        assert snapshot(repo, *CLAUDE_FILES) == before
        assert not (repo / ".vera/opencode").exists()
        standin.requests.clear()
        (repo / credential_files("claude-code").token).write_text("eyJ.ended.x")
        renewed = vera("mcp-token", "--runtime", "claude-code")
        assert renewed.returncode == 0 and renewed.stdout.strip() == TOKEN, renewed.stderr
        [mint] = mint_requests(standin)
        assert mint["body"]["scopes"] == list(credential_scopes("claude-code", "suggest"))


def test_codex_and_opencode_in_different_save_modes(repo, vera, home_env):
    with StandIn(auth=TOKEN) as standin:
        assert run(vera, standin, "codex", "--save-mode", "off", key=True).returncode == 0
        done = run(vera, standin, "opencode", "--save-mode", "auto-propose")
        assert done.returncode == 0, done.stderr
        assert "**off**" in (repo / ".agents/skills/vera/SKILL.md").read_text()
        assert "**auto-propose**" in (
            repo / ".vera/opencode/skills/vera-opencode/SKILL.md").read_text()
        record = read_record(repo)
        assert {n: c.credential for n, c in record.items()} == {
            n: credential_files(n).label for n in ("codex", "opencode")}


def test_a_reconnect_without_flags_keeps_the_chosen_save_mode(repo, vera, home_env):
    with StandIn(auth=TOKEN) as standin:
        assert run(vera, standin, "codex", "--save-mode", "off", key=True).returncode == 0
        again = run(vera, standin, "codex")
        assert again.returncode == 0, again.stderr
        assert "save mode: off (kept" in again.stdout
        assert read_record(repo)["codex"].overrides == {"defaults.save_mode": "off"}
        standin.requests.clear()
        changed = run(vera, standin, "codex", "--save-mode", "suggest")
        assert changed.returncode == 0
        assert "save mode: suggest" in changed.stdout
        [mint] = mint_requests(standin)
        assert mint["body"]["scopes"] == list(credential_scopes("codex", "suggest"))


# The shared layout, as the connect before this one wrote it: one token and one stored key
# for every runtime of a checkout, the headers helpers without --runtime, and OpenCode's
# skill in .agents/skills/vera/, shared with Codex.
def _shared_opencode(mode: str, api_url: str) -> list[Artifact]:
    permission = {f"vera_{tool}": d for tool, d in artifacts.write_decisions(mode).items()}
    plugin = plugin_source().replace("__VERA_API_URL__", json.dumps(api_url))
    return [
        Artifact(".agents/skills/vera/SKILL.md", "file", render_skill(mode)),
        Artifact(f"{artifacts.OPENCODE_DIR}/vera_hook.py", "file", hook_source()),
        Artifact(artifacts.OPENCODE_PLUGIN, "file", plugin),
        Artifact("opencode.json", "json-merge",
                 {"plugin": [f"./{artifacts.OPENCODE_PLUGIN}"], "permission": permission}),
    ]


def shared_layout_connect(monkeypatch: pytest.MonkeyPatch, repo: Path, home_env: dict,
                          standin: StandIn, runtime: str, *extra: str) -> None:
    with monkeypatch.context() as legacy:
        for module in (connect, commands, doctor, disconnect, credentials, opencode):
            if hasattr(module, "credential_files"):
                legacy.setattr(module, "credential_files", lambda runtime: SHARED)
        for adapter in (claude_code, codex):
            legacy.setattr(adapter, "HEADERS_HELPER", "vera mcp-token --headers")
        store_file = credentials.store_file
        legacy.setattr(credentials, "store_file", lambda root, runtime: store_file(root, None))
        legacy.setitem(artifacts._RENDERERS, "opencode", _shared_opencode)
        for name in ("HOME", "XDG_STATE_HOME"):
            legacy.setenv(name, home_env[name])
        legacy.chdir(repo)
        legacy.setattr(sys, "stdin", io.StringIO(API_KEY + "\n"))
        code = cli.main(["connect", runtime, "--api-url", standin.url, "--mcp-url",
                         standin.mcp_url, "--yes", "--api-key-stdin", *extra])
    assert code == 0


def test_the_shared_layout_is_migrated_runtime_by_runtime(
        monkeypatch, repo, vera, home_env):
    with StandIn(auth=TOKEN) as standin:
        shared_layout_connect(monkeypatch, repo, home_env, standin, "codex")
        shared_layout_connect(monkeypatch, repo, home_env, standin, "opencode")
        assert (repo / SHARED.token).read_text() == TOKEN
        assert {c.credential for c in read_record(repo).values()} == {SHARED.label}
        *replaced, shared_key = standin.issued.values()  # each connect replaced the key
        assert standin.revoked == set(replaced)
        report = vera("doctor", "opencode")
        assert "TODO mcp token: shared_credential" in report.stdout, report.stdout

        # Codex first, in another save mode: it takes the shared skill over and gets its own
        # key, made with the shared one; OpenCode still sends the shared token.
        moved = run(vera, standin, "codex", "--save-mode", "off")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert (repo / credential_files("codex").token).read_text() == TOKEN
        assert (repo / SHARED.token).exists() and standin.revoked == set(replaced)
        assert "**off**" in (repo / ".agents/skills/vera/SKILL.md").read_text()
        record = read_record(repo)
        assert record["codex"].credential == credential_files("codex").label
        assert not any(e.file == ".agents/skills/vera/SKILL.md"
                       for e in record["opencode"].entries)
        assert "shared_credential" in vera("doctor", "opencode").stdout

        # OpenCode next: its own files and key; nothing sends the shared token any more,
        # so its files go and its key is revoked.
        moved = run(vera, standin, "opencode")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert not any((repo / rel).exists() for rel in SHARED.paths)
        assert standin.revoked == {*replaced, shared_key}
        state = Path(home_env["HOME"]) / ".local/state/vera" / credentials.FOLDER
        assert sorted(p.name.split(".", 1)[1] for p in state.iterdir()) == [
            "codex.json", "opencode.json"]
        assert (repo / ".vera/opencode/skills/vera-opencode/SKILL.md").exists()
        assert "**off**" in (repo / ".agents/skills/vera/SKILL.md").read_text()
        assert save_mode(read_record(repo)["opencode"].contract) == "suggest"

        for name in ("codex", "opencode"):
            assert vera("disconnect", name, "--yes").returncode == 0
        assert not (repo / ".vera").exists() and not (repo / ".agents").exists()
        assert list(state.iterdir()) == []


def test_disconnecting_the_last_shared_layout_runtime_cleans_it_up(
        monkeypatch, repo, vera, home_env):
    with StandIn(auth=TOKEN) as standin:
        shared_layout_connect(monkeypatch, repo, home_env, standin, "claude-code")
        [shared_key] = standin.issued.values()
        done = vera("disconnect", "claude-code", "--yes")
        assert done.returncode == 0, done.stderr
        assert standin.revoked == {shared_key}
        assert not (repo / ".vera").exists()
