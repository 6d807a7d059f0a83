"""`vera doctor` rows of the GUIDE's verification matrix: the runtime's own CLI and VERA's
tools/list decide, and a missing trust step is named, never taken."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import runtime_cli as cli
import tomlkit
from standin import API_KEY, StandIn

from vera.integrations.ownership import credential_files
from vera.integrations.runtimes import codex

TOKEN = "eyJ.doctor-test-jwt.signature"


def connect(vera, standin, runtime, *extra, stdin=None):
    done = vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes", *extra, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done


def doctor(vera, runtime_bin, home_env, *args, env=None):
    return vera("doctor", *args, env={"PATH": f"{runtime_bin}:{home_env['PATH']}", **(env or {})})


def test_untrusted_workspace_codex_hook_hash_trust(repo, vera, runtime_bin, home_env):
    with StandIn() as standin:
        connect(vera, standin, "codex")
        cli.trust_codex_project(repo, home_env)
        before = doctor(vera, runtime_bin, home_env, "codex")
        assert before.returncode == 1
        assert "TODO codex hook trust" in before.stdout and "untrusted" in before.stdout
        env = {**home_env, "PATH": f"{runtime_bin}:{home_env['PATH']}"}
        hooks = codex.hook_trust(repo, env)
        assert hooks and hooks[0]["timeoutSec"] == 5
        # What a person does with /hooks in Codex, done here in the temp home.
        config = Path(home_env["CODEX_HOME"]) / "config.toml"
        doc = tomlkit.parse(config.read_text())
        state = doc.setdefault("hooks", tomlkit.table()).setdefault("state", tomlkit.table())
        for hook in hooks:
            state[hook["key"]] = {"trusted_hash": hook["currentHash"]}
        config.write_text(tomlkit.dumps(doc))
        after = doctor(vera, runtime_bin, home_env, "codex")
        assert after.returncode == 0, after.stdout
        assert "ok   codex hook trust: trusted" in after.stdout


def test_missing_and_rejected_auth(repo, vera, runtime_bin, home_env):
    with StandIn(auth=TOKEN) as standin:
        connect(vera, standin, "codex")  # no key typed: the token step stays open
        missing = doctor(vera, runtime_bin, home_env, "codex")
        assert missing.returncode == 1 and "TODO mcp token:" in missing.stdout
        connect(vera, standin, "codex", "--api-key-stdin", stdin=API_KEY + "\n")
        cli.trust_codex_project(repo, home_env)
        (repo / credential_files("codex").token).write_text("eyJ.expired-or-wrong-audience.x")
        # `vera` is not on this PATH: doctor cannot refresh, and sends the file's token.
        rejected = doctor(vera, runtime_bin, home_env, "codex")
        assert "TODO mcp token refresh" in rejected.stdout
        assert "TODO vera tools visible: cannot list tools" in rejected.stdout
        assert "expired-or-wrong-audience" not in rejected.stdout  # redacted
        (repo / credential_files("codex").token).write_text(TOKEN)
        good = doctor(vera, runtime_bin, home_env, "codex")
        assert "ok   vera tools visible: 2 tools" in good.stdout
        assert TOKEN not in good.stdout


def test_offline_vera_doctor_reports_degraded(repo, vera, runtime_bin, home_env):
    with StandIn() as standin:
        connect(vera, standin, "claude-code")
    cli.approve_claude_server(repo, home_env)
    report = doctor(vera, runtime_bin, home_env, "claude-code")
    assert report.returncode == 1
    assert "TODO claude connects to vera" in report.stdout
    assert "TODO vera tools visible: cannot list tools" in report.stdout


def test_monorepo_connects_at_the_repository_root(repo, vera):
    package = repo / "packages" / "app"
    package.mkdir(parents=True)
    with StandIn() as standin:
        done = vera("connect", "claude-code", "--api-url", standin.url, "--mcp-url",
                    standin.mcp_url, "--yes", cwd=package)
    assert done.returncode == 0, done.stderr
    assert (repo / ".mcp.json").exists() and not (package / ".mcp.json").exists()


def test_worktree_connects_in_its_own_checkout(repo, vera, tmp_path):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    worktree = tmp_path / "feature"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", "feature",
                    str(worktree)], check=True)
    with StandIn() as standin:
        done = vera("connect", "codex", "--api-url", standin.url, "--mcp-url",
                    standin.mcp_url, "--yes", cwd=worktree)
    assert done.returncode == 0, done.stderr
    assert (worktree / ".codex/config.toml").exists()
    assert not (repo / ".codex").exists()


def test_doctor_checks_the_approval_rules_inside_the_config_and_runs_the_hook(
        repo, vera, runtime_bin, home_env):
    with StandIn() as standin:
        connect(vera, standin, "opencode")
        before = doctor(vera, runtime_bin, home_env, "opencode")
        assert "ok   vera config and approval rules unchanged" in before.stdout
        assert "ok   vera hook runs" in before.stdout
        assert "ok   vera approval:" in before.stdout  # per tool here, said so
        config = json.loads((repo / "opencode.json").read_text())
        config["permission"]["vera_knowledge_propose"] = "allow"  # a write without a click
        (repo / "opencode.json").write_text(json.dumps(config))
        after = doctor(vera, runtime_bin, home_env, "opencode")
    assert after.returncode == 1
    assert "TODO vera config and approval rules unchanged" in after.stdout
    line = next(ln for ln in after.stdout.splitlines() if "approval rules" in ln)
    assert "opencode.json" in line
