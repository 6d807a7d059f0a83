"""The GUIDE's verification matrix for `vera connect | disconnect`, against the real runtime
CLIs (pinned, installed by scripts/runtimes) and a loopback VERA stand-in.

Each test is named after its matrix row; the runtime CLI decides whether what connect wrote
is valid (it parses the project files the way the runtime will)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import runtime_cli as cli
from runtime_fakes import FakeResponses
from standin import API_KEY, TOOLS, StandIn

from vera.integrations.credentials import headers_command
from vera.integrations.editors import parse_json, parse_toml
from vera.integrations.ownership import credential_files, is_credential_file
from vera.integrations.runtimes import codex

RUNTIMES = ("claude-code", "codex", "opencode")
TOKEN = "eyJ.test-mcp-jwt.signature"


@pytest.fixture
def standin():
    with StandIn() as running:
        yield running


def tree(root: Path) -> dict[str, str]:
    """Every file but Git's and the packages OpenCode installs for plugins by itself."""
    skip = {".git", "node_modules"}
    return {str(p.relative_to(root)): p.read_text(errors="replace")
            for p in sorted(root.rglob("*"))
            if p.is_file() and not skip & set(p.relative_to(root).parts)}


def connect(vera, standin: StandIn, runtime: str, *extra: str, stdin: str | None = None):
    return vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes", *extra, stdin=stdin)


def runtime_sees_vera(runtime_bin: Path, runtime: str, repo: Path, env: dict[str, str],
                      url: str) -> None:
    if runtime == "claude-code":
        assert "Connected" in cli.claude_get(runtime_bin, repo, env)
    elif runtime == "codex":
        cli.trust_codex_project(repo, env)
        server = cli.codex_get(runtime_bin, repo, env)
        assert server is not None and server["transport"]["url"] == url
        # `codex mcp get` only reads the config; a headless session connects, and the
        # model is offered the stand-in's tools under Codex's `mcp__vera` namespace.
        assert codex_session_tools(runtime_bin, repo, env) == {t["name"] for t in TOOLS}
    else:
        assert cli.opencode_config(runtime_bin, repo, env).returncode == 0
        assert "✓ vera" in cli.opencode_list(runtime_bin, repo, env)


def codex_session_tools(runtime_bin: Path, repo: Path, env: dict[str, str]) -> set[str]:
    """The MCP tools one `codex exec` offered its (scripted) model from the `vera` server."""
    model = FakeResponses()
    config = Path(env["CODEX_HOME"]) / "config.toml"
    original = config.read_text()
    config.write_text(f'model = "fake-model"\nmodel_provider = "fake"\n{original}\n'
                      f'[model_providers.fake]\nname = "fake"\nbase_url = "{model.url}/v1"\n'
                      'wire_api = "responses"\nenv_key = "FAKE_API_KEY"\n')
    try:
        done = subprocess.run(
            [str(runtime_bin / "codex"), "exec", "--skip-git-repo-check",
             "--dangerously-bypass-hook-trust", "list your tools"], cwd=repo,
            env={**env, "FAKE_API_KEY": "x"}, capture_output=True, text=True, timeout=180,
            stdin=subprocess.DEVNULL)
    finally:
        model.close()
        config.write_text(original)
    assert done.returncode == 0, done.stderr[-2000:]
    return {tool.get("name") for body in model.bodies for namespace in body.get("tools", [])
            if namespace.get("name") == "mcp__vera" for tool in namespace.get("tools", [])}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_clean_repository(runtime, repo, vera, standin, runtime_bin, home_env):
    done = connect(vera, standin, runtime)
    assert done.returncode == 0, done.stderr
    assert f"VERA setup completed for {runtime}" in done.stdout
    runtime_sees_vera(runtime_bin, runtime, repo, home_env, standin.mcp_url)
    doctor = vera("doctor", runtime, env={"PATH": f"{runtime_bin}:{home_env['PATH']}"})
    assert "vera tools visible: 2 tools" in doctor.stdout
    gone = vera("disconnect", runtime, "--yes")
    assert gone.returncode == 0, gone.stderr
    leftover = {p for p in tree(repo) if not p.startswith(".opencode/")}
    assert leftover == set()  # OpenCode's own .opencode files are the runtime's


UNRELATED = {
    ".mcp.json": (
        '{\n  "mcpServers": {\n'
        '    "docs": {"type": "http", "url": "http://127.0.0.1:1/mcp"}\n  }\n}\n'),
    ".claude/settings.json": (
        '{\n  "hooks": {\n    "SessionStart": [\n      {"matcher": "startup", '
        '"hooks": [{"type": "command", "command": "true"}]}\n    ]\n  },\n'
        '  "permissions": {"ask": ["Bash(rm:*)"]}\n}\n'),
    ".claude/skills/review/SKILL.md": "---\nname: review\ndescription: team review\n---\nbody\n",
    ".codex/config.toml": (
        '# team settings\nmodel = "gpt-x"  # pinned\n\n[mcp_servers.docs]\n'
        'url = "http://127.0.0.1:1/mcp" # docs server\n'),
    ".codex/hooks.json": (
        '{"hooks": {"SessionStart": [{"matcher": "startup", '
        '"hooks": [{"type": "command", "command": "true"}]}]}}\n'),
    "opencode.jsonc": (
        '{\n  // team config\n  "$schema": "https://opencode.ai/config.json",\n'
        '  "mcp": {\n    "docs": { "type": "remote", "url": "http://127.0.0.1:1/mcp", },'
        ' // docs\n  },\n  /* plugins by the team */\n  "plugin": [],\n}\n'),
    ".opencode/plugins/team.js": "export const Team = async () => ({});\n",
}


def write(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_existing_unrelated_servers_skills_hooks_and_plugins(runtime, repo, vera, standin,
                                                             runtime_bin, home_env):
    write(repo, UNRELATED)
    done = connect(vera, standin, runtime)
    assert done.returncode == 0, done.stderr
    runtime_sees_vera(runtime_bin, runtime, repo, home_env, standin.mcp_url)
    if runtime == "claude-code":
        assert "docs" in parse_json((repo / ".mcp.json").read_text())["mcpServers"]
        settings = parse_json((repo / ".claude/settings.json").read_text())
        assert settings["hooks"]["SessionStart"][0]["matcher"] == "startup"
        assert "Bash(rm:*)" in settings["permissions"]["ask"]
    assert vera("disconnect", runtime, "--yes").returncode == 0
    after = {p: t for p, t in tree(repo).items()
             if p in UNRELATED or not p.startswith(".opencode/")}
    assert after == UNRELATED  # byte for byte


def test_jsonc_and_toml_with_comments(repo, vera, standin, runtime_bin, home_env):
    write(repo, {k: UNRELATED[k] for k in (".codex/config.toml", "opencode.jsonc")})
    for runtime in ("codex", "opencode"):
        assert connect(vera, standin, runtime).returncode == 0
    toml = (repo / ".codex/config.toml").read_text()
    # Comments and layout kept; Codex's startup grace is a top-level key, so it sits above
    # the first table.
    grace = f"{codex.GRACE_KEY} = {codex.STARTUP_GRACE_MS}\n"
    assert toml.replace(grace, "", 1).startswith(UNRELATED[".codex/config.toml"])
    assert parse_toml(toml)["mcp_servers"]["vera"]["default_tools_approval_mode"] == "writes"
    jsonc = (repo / "opencode.jsonc").read_text()
    assert "// team config" in jsonc and "/* plugins by the team */" in jsonc
    assert not (repo / "opencode.json").exists()
    # OpenCode parsing the commented JSONC is covered by the unrelated-config row.
    runtime_sees_vera(runtime_bin, "codex", repo, home_env, standin.mcp_url)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_equivalent_existing_vera_definition_reused(runtime, repo, vera, standin):
    existing = {
        "claude-code": (".mcp.json", json.dumps({"mcpServers": {"vera": {
            "type": "http", "url": standin.mcp_url}}}, indent=2) + "\n"),
        # Codex's is equivalent with the timeouts connect writes (a hung call must end, a
        # slow start must not leave the session without VERA).
        "codex": (".codex/config.toml", f'[mcp_servers.vera]\nurl = "{standin.mcp_url}"\n'
                  f"tool_timeout_sec = {codex.TOOL_TIMEOUT_SECONDS}\n"
                  f"startup_timeout_sec = {codex.STARTUP_TIMEOUT_SECONDS}\n"),
        "opencode": ("opencode.json", json.dumps({"mcp": {"vera": {
            "type": "remote", "url": standin.mcp_url}}}, indent=2) + "\n"),
    }[runtime]
    write(repo, dict([existing]))
    assert connect(vera, standin, runtime).returncode == 0
    text = (repo / existing[0]).read_text()
    assert text.count(standin.mcp_url) == 1  # reused, not duplicated
    assert vera("disconnect", runtime, "--yes").returncode == 0
    assert (repo / existing[0]).read_text() == existing[1]  # the user's, so it stays


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_conflicting_vera_endpoint_requires_user_selection(runtime, repo, vera, standin):
    other = "https://vera.elsewhere.example/mcp"
    existing = {
        "claude-code": (".mcp.json", json.dumps({"mcpServers": {"vera": {
            "type": "http", "url": other}}})),
        "codex": (".codex/config.toml", f'[mcp_servers.vera]\nurl = "{other}"\n'),
        "opencode": ("opencode.json", json.dumps({"mcp": {"vera": {
            "type": "remote", "url": other}}})),
    }[runtime]
    write(repo, dict([existing]))
    before = tree(repo)
    done = connect(vera, standin, runtime)
    assert done.returncode == 3
    assert "conflict:" in done.stderr and "vera" in done.stderr
    assert tree(repo) == before  # nothing written


@pytest.mark.parametrize(("users", "kept"), [(None, False), (0, True), (20_000, True),
                                             (500, False)])
def test_codex_first_turn_waits_for_vera(users, kept, repo, vera, standin):
    """Connect sets Codex's startup grace (how long the first turn waits for a server still
    starting) to VERA's; a user's own grace that waits at least as long is kept and stays
    after disconnect; a shorter one is a conflict the user resolves."""
    original = "" if users is None else f"mcp_optional_startup_grace_ms = {users}\n"
    if original:
        write(repo, {".codex/config.toml": original})
    before = tree(repo)
    done = connect(vera, standin, "codex")
    if users is not None and not kept:
        assert done.returncode == 3 and "mcp_optional_startup_grace_ms" in done.stderr
        assert tree(repo) == before  # nothing written
        return
    assert done.returncode == 0, done.stderr
    grace = parse_toml((repo / ".codex/config.toml").read_text())[codex.GRACE_KEY]
    assert grace == (users if kept else codex.STARTUP_GRACE_MS)
    assert "ok   vera config and approval rules unchanged" in vera("doctor", "codex").stdout
    assert vera("disconnect", "codex", "--yes").returncode == 0
    left = repo / ".codex/config.toml"
    assert (left.read_text() if left.exists() else "") == original


def test_user_global_vera_config_plus_project_override(repo, vera, standin, runtime_bin,
                                                       home_env):
    user = Path(home_env["CODEX_HOME"]) / "config.toml"
    user.write_text('[mcp_servers.vera]\nurl = "https://vera.global.example/mcp"\n')
    assert connect(vera, standin, "codex").returncode == 0
    cli.trust_codex_project(repo, home_env)
    assert cli.codex_get(runtime_bin, repo, home_env)["transport"]["url"] == standin.mcp_url


def test_untrusted_workspace(repo, vera, standin, runtime_bin, home_env):
    assert connect(vera, standin, "codex").returncode == 0
    assert connect(vera, standin, "claude-code").returncode == 0
    assert cli.codex_get(runtime_bin, repo, home_env) is None  # Codex's own gate holds
    doctor = vera("doctor", env={"PATH": f"{runtime_bin}:{home_env['PATH']}"})
    assert doctor.returncode == 1
    assert "TODO codex project trust" in doctor.stdout
    assert "TODO claude folder trust" in doctor.stdout
    assert "TODO claude server approval" in doctor.stdout
    assert not (Path(home_env["HOME"]) / ".codex" / "config.toml").exists()  # never bypassed


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_missing_auth_token_from_typed_api_key(runtime, repo, vera, runtime_bin, home_env):
    with StandIn(auth=TOKEN) as standin:
        done = connect(vera, standin, runtime, "--api-key-stdin", stdin=API_KEY + "\n")
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout + done.stderr and API_KEY not in done.stdout
        files = credential_files(runtime)
        private = [repo / rel for rel in files.paths]
        assert (repo / files.token).read_text() == TOKEN
        assert (repo / files.minted_for).read_text().strip() == standin.mcp_url
        for path in private:
            assert path.stat().st_mode & 0o077 == 0
            ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=repo)
            assert ignored.returncode == 0
        tracked = {p: t for p, t in tree(repo).items() if not is_credential_file(p)}
        assert not any(TOKEN in t or API_KEY in t for t in tracked.values())
        reference = {"claude-code": "headersHelper", "codex": "http_headers_helper",
                     "opencode": "{file:.vera/opencode/mcp-token}"}[runtime]
        assert any(reference in t for t in tracked.values())
        mcp_posts = [r for r in standin.requests if r["path"] == "/mcp"]
        assert all(API_KEY not in json.dumps(r) for r in mcp_posts)  # never sent to MCP
        # Nothing exported: Claude Code and Codex run `vera mcp-token --headers` (the
        # installed `vera` on their PATH), OpenCode reads the file (and its plugin runs it).
        assert "VERA_MCP_TOKEN" not in done.stdout
        env = {**home_env, "PATH": f"{Path(sys.executable).parent}:{home_env['PATH']}"}
        if runtime == "claude-code":
            cli.trust_claude_folder(repo, env)
        runtime_sees_vera(runtime_bin, runtime, repo, env, standin.mcp_url)


def test_wrong_api_key_writes_nothing(repo, vera):
    with StandIn(auth=TOKEN) as standin:
        done = connect(vera, standin, "claude-code", "--api-key-stdin", stdin="wrong\n")
        assert done.returncode == 2 and "api_key" not in done.stdout
        assert tree(repo) == {}


def test_oauth_advertised_prefers_runtime_oauth(repo, vera):
    with StandIn(auth=TOKEN, oauth_issuer="https://login.example") as standin:
        done = connect(vera, standin, "codex")
        assert done.returncode == 0, done.stderr
        assert "codex mcp login vera" in done.stdout
        server = parse_toml((repo / ".codex/config.toml").read_text())["mcp_servers"]["vera"]
        assert "http_headers_helper" not in server
        assert not (repo / credential_files("codex").token).exists()


def test_offline_vera_writes_nothing(repo, vera):
    done = vera("connect", "opencode", "--api-url", "http://127.0.0.1:9",
                "--mcp-url", "http://127.0.0.1:9/mcp", "--yes")
    assert done.returncode == 1 and "FAIL" in done.stdout
    assert tree(repo) == {}


@pytest.mark.parametrize("url", ["ftp://host/mcp", "https://user:pw@host/mcp",
                                 "https://host/mcp?token=x", "not a url"])
def test_url_validation_names_the_field(url, vera, repo):
    done = vera("connect", "codex", "--api-url", "http://127.0.0.1:9", "--mcp-url", url)
    assert done.returncode == 2 and "mcp_url" in done.stderr


def test_without_approval_nothing_is_written(repo, vera, standin):
    done = vera("connect", "claude-code", "--api-url", standin.url, "--mcp-url",
                standin.mcp_url, stdin="")
    assert done.returncode == 1 and "+++ b/.mcp.json" in done.stdout  # the exact diff
    assert tree(repo) == {}


def test_symlinked_config_is_refused(repo, vera, standin, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}\n")
    (repo / ".mcp.json").symlink_to(target)
    done = connect(vera, standin, "claude-code")
    assert done.returncode == 3
    assert target.read_text() == "{}\n"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_disconnect_without_unrelated_loss_keeps_user_edits(runtime, repo, vera, standin):
    assert connect(vera, standin, runtime).returncode == 0
    skill = repo / {"claude-code": ".claude/skills/vera", "codex": ".agents/skills/vera",
                    "opencode": ".vera/opencode/skills/vera-opencode"}[runtime] / "SKILL.md"
    skill.write_text(skill.read_text() + "\nteam note\n")
    done = vera("disconnect", runtime, "--yes")
    assert done.returncode == 3 and "conflict:" in done.stderr
    assert skill.read_text().endswith("team note\n")  # the user's edit survives


def test_each_runtime_keeps_its_own_skill(repo, vera, standin):
    """Codex and OpenCode each own their skill: disconnecting one leaves the other's."""
    assert connect(vera, standin, "codex").returncode == 0
    assert connect(vera, standin, "opencode", "--save-mode", "off").returncode == 0
    opencode_skill = repo / ".vera/opencode/skills/vera-opencode/SKILL.md"
    assert "Save mode for this project: **off**" in opencode_skill.read_text()
    assert "**suggest**" in (repo / ".agents/skills/vera/SKILL.md").read_text()
    assert vera("disconnect", "codex", "--yes").returncode == 0
    assert not (repo / ".agents").exists()
    assert opencode_skill.exists()
    assert vera("disconnect", "opencode", "--yes").returncode == 0
    assert tree(repo) == {}


def test_update_to_newer_contract(repo, vera, standin):
    assert connect(vera, standin, "opencode").returncode == 0
    record = repo / ".vera/integrations.json"
    data = json.loads(record.read_text())
    data["runtimes"]["opencode"]["contract"]["vera_integration_contract"] = 0  # an older one
    record.write_text(json.dumps(data))
    assert connect(vera, standin, "opencode", "--save-mode", "off").returncode == 0
    config = parse_json((repo / "opencode.json").read_text())
    assert config["permission"]["vera_knowledge_propose"] == "deny"
    assert (repo / "opencode.json").read_text().count('"remote"') == 1  # no duplicate
    now = json.loads(record.read_text())["runtimes"]["opencode"]
    assert now["contract"]["vera_integration_contract"] == 1
    assert now["overrides"] == {"defaults.save_mode": "off"}
    assert vera("disconnect", "opencode", "--yes").returncode == 0
    assert tree(repo) == {}


def test_static_token_kept_until_oauth_is_proven(repo, vera):
    with StandIn(auth=TOKEN) as standin:
        assert connect(vera, standin, "codex", "--api-key-stdin",
                       stdin=API_KEY + "\n").returncode == 0
    with StandIn(auth=TOKEN, oauth_issuer="https://login.example") as standin:
        kept = connect(vera, standin, "codex")
        assert kept.returncode == 0, kept.stderr
        server = parse_toml((repo / ".codex/config.toml").read_text())["mcp_servers"]["vera"]
        assert server["http_headers_helper"] == headers_command("codex")
        token_file = repo / credential_files("codex").token
        assert token_file.exists()
        token_file.unlink()  # the user proved OAuth and drops the token
        switched = connect(vera, standin, "codex")
        assert switched.returncode == 0, switched.stderr
        server = parse_toml((repo / ".codex/config.toml").read_text())["mcp_servers"]["vera"]
        assert "http_headers_helper" not in server


def test_a_reconnect_without_flags_keeps_the_reviewed_save_mode(repo, vera):
    def connect_opencode(standin, *extra):
        done = vera("connect", "opencode", "--api-url", standin.url, "--mcp-url",
                    standin.mcp_url, "--yes", *extra)
        assert done.returncode == 0, done.stderr
        record = json.loads((repo / ".vera/integrations.json").read_text())["runtimes"]
        rules = json.loads((repo / "opencode.json").read_text())["permission"]
        return record["opencode"]["overrides"], rules["vera_knowledge_propose"]

    with StandIn() as standin:
        first = connect_opencode(standin, "--save-mode", "off")
        again = connect_opencode(standin)
        changed = connect_opencode(standin, "--save-mode", "suggest")
    assert first == again == ({"defaults.save_mode": "off"}, "deny")
    assert changed == ({}, "ask")
