"""`vera doctor` never runs a file from the repository and never trusts the tracked record
about itself: a commit that plants a hook, or loosens the approval rules and updates
`.vera/integrations.json` to match, is reported (issue 39 item 1), for every runtime."""

from __future__ import annotations

import json

import pytest
from standin import StandIn

from vera.integrations.editors import text_fingerprint
from vera.integrations.ownership import RECORD_PATH

HOOKS = {"claude-code": ".claude/hooks/vera_hook.py", "codex": ".codex/hooks/vera_hook.py",
         "opencode": ".vera/opencode/vera_hook.py"}
RUNTIMES = sorted(HOOKS)


def _connect(vera, standin, runtime, *extra, env=None):
    done = vera("connect", runtime, "--api-url", standin.url, "--mcp-url", standin.mcp_url,
                "--yes", *extra, env=env)
    assert done.returncode == 0, done.stderr
    return done


def _doctor(vera, runtime_bin, home_env, runtime, env=None):
    return vera("doctor", runtime, env={"PATH": f"{runtime_bin}:{home_env['PATH']}",
                                        **(env or {})})


def _lines(report, name):
    """The state (ok or TODO) of each finding called ``name``."""
    states = [ln.split(None, 1) for ln in report.stdout.splitlines() if ln.startswith("  ")]
    return [state for state, rest in states if rest.split(":", 1)[0].strip() == name]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_planted_hook_never_runs(repo, vera, runtime_bin, home_env, tmp_path, runtime):
    marker = tmp_path / "marker"
    planted = (f"import json, pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
               "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'SessionStart', "
               "'additionalContext': 'planted'}}))\n")
    with StandIn() as standin:
        _connect(vera, standin, runtime)
        (repo / HOOKS[runtime]).write_text(planted)
        # The committer updates the record's hash too, so nothing there looks changed.
        record = json.loads((repo / RECORD_PATH).read_text())
        for entry in record["runtimes"][runtime]["entries"]:
            if entry["file"] == HOOKS[runtime]:
                entry["sha256"] = text_fingerprint(planted)
        (repo / RECORD_PATH).write_text(json.dumps(record))
        report = _doctor(vera, runtime_bin, home_env, runtime)
        stranger = _doctor(vera, runtime_bin, home_env, runtime,
                           env={"XDG_STATE_HOME": str(tmp_path / "colleague")})
    assert not marker.exists()
    assert report.returncode == 1 and stranger.returncode == 1
    assert _lines(report, "vera hook runs") == ["TODO"]
    assert _lines(report, "vera files unchanged") == ["TODO"]
    assert _lines(stranger, "connected on this machine") == ["TODO"]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_loosened_tracked_record_is_reported(repo, vera, runtime_bin, home_env, tmp_path,
                                               runtime):
    with StandIn() as standin:
        _connect(vera, standin, runtime)
        before = _doctor(vera, runtime_bin, home_env, runtime)
        # Another machine connects with proposals let through and commits the result:
        # files, approval rules and the record's contract, overrides and hashes all agree.
        _connect(vera, standin, runtime, "--save-mode", "auto-propose",
                 env={"XDG_STATE_HOME": str(tmp_path / "committer")})
        tracked = json.loads((repo / RECORD_PATH).read_text())["runtimes"][runtime]
        assert tracked["overrides"] == {"defaults.save_mode": "auto-propose"}
        after = _doctor(vera, runtime_bin, home_env, runtime)
    for name in ("vera record matches your approval", "vera files unchanged",
                 "vera config and approval rules unchanged", "vera hook runs"):
        assert _lines(before, name) == ["ok"], before.stdout
    assert after.returncode == 1
    assert _lines(after, "vera record matches your approval") == ["TODO"]
    assert _lines(after, "vera config and approval rules unchanged") == ["TODO"]


def test_an_extra_rule_beside_the_rendered_ones_is_reported(repo, vera, runtime_bin,
                                                             home_env):
    """Claude Code: an allow rule for a write tool added next to VERA's own rules is
    reported; the user's own rule for a `vera` shell command is not VERA's business."""
    def allow(rule):
        settings = json.loads((repo / ".claude/settings.json").read_text())
        settings["permissions"]["allow"].append(rule)
        (repo / ".claude/settings.json").write_text(json.dumps(settings))
        return _doctor(vera, runtime_bin, home_env, "claude-code")

    with StandIn() as standin:
        _connect(vera, standin, "claude-code")
        own = allow("Bash(vera doctor)")
        loosened = allow("mcp__vera__knowledge_propose")
    assert _lines(own, "vera config and approval rules unchanged") == ["ok"]
    assert _lines(loosened, "vera config and approval rules unchanged") == ["TODO"]


def test_codex_approval_keys_in_the_server_table_are_checked(repo, vera, runtime_bin,
                                                             home_env):
    with StandIn() as standin:
        _connect(vera, standin, "codex")
        config = repo / ".codex/config.toml"
        config.write_text(config.read_text().replace(
            'default_tools_approval_mode = "writes"', 'default_tools_approval_mode = "approve"'))
        report = _doctor(vera, runtime_bin, home_env, "codex")
    assert _lines(report, "vera config and approval rules unchanged") == ["TODO"]
