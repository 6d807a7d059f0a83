#!/usr/bin/env python3
"""VERA SessionStart and PreToolUse hook, written by `vera connect` (Python 3 standard
library only).

pre-tool-use decides knowledge_get_context per call in Claude Code: an ephemeral retrieval
runs without a click, a persisted one (a write) asks; anything it cannot read asks.

session-start is stateless and fail-open: it derives sanitized Git metadata (canonical
remote identity, branch, repository-relative code path) locally, checks whether the VERA
API answers, and adds one tagged line of bootstrap arguments to the agent's context. It
never calls MCP, never reads the prompt, transcript, diffs or file contents, and always
exits 0.
"""

# ruff: noqa: F821 - canonicalize and relative_code_path are inlined from
# vera.repository_identity when `vera connect` renders this file.
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

# __REPOSITORY_IDENTITY__

TAG = "[vera-hook session-start]"
# The whole hook stays well inside the 5 s the runtime allows it, whatever Git or the
# network do; each step gets what is left of the budget.
BUDGET_S = 3.5
PROBE_TIMEOUT_S = 1.5
MAX_EVENT_BYTES = 1 << 20
_DEADLINE = time.monotonic() + BUDGET_S


def _remaining(cap: float) -> float:
    return max(0.05, min(cap, _DEADLINE - time.monotonic()))


def _git(cwd: str, *args: str) -> str | None:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", "-C", cwd, *args],
            capture_output=True,
            text=True,
            timeout=_remaining(1.0),
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def _event_cwd() -> str:
    """The session's working directory from the event; every other field is ignored."""
    try:
        event = json.loads(sys.stdin.read(MAX_EVENT_BYTES) or "{}")
    except (ValueError, OSError):
        event = {}
    cwd = event.get("cwd") if isinstance(event, dict) else None
    return cwd if isinstance(cwd, str) and os.path.isdir(cwd) else os.getcwd()


def _remote(cwd: str) -> str | None:
    names = (_git(cwd, "remote") or "").split()
    if not names:
        return None
    name = "origin" if "origin" in names else names[0]
    return _git(cwd, "remote", "get-url", name)


def bootstrap_arguments(cwd: str) -> dict[str, str]:
    top = _git(cwd, "rev-parse", "--show-toplevel")
    if top is None:
        return {}
    arguments: dict[str, str] = {}
    remote = _remote(cwd)
    repository = canonicalize(remote) if remote else None
    if repository:
        arguments["repository"] = repository
    branch = _git(cwd, "symbolic-ref", "--quiet", "--short", "HEAD")  # None on a detached HEAD
    if branch:
        arguments["branch"] = branch
    relative = os.path.relpath(os.path.realpath(cwd), os.path.realpath(top))
    code_path = relative_code_path(relative) if relative != "." else None
    if code_path:
        arguments["code_path"] = code_path
    return arguments


def vera_status(api_url: str | None) -> str:
    if not api_url:
        return "unknown"
    request = urllib.request.Request(
        api_url.rstrip("/") + "/readyz", headers={"User-Agent": "vera-hook/1"}
    )
    try:
        with urllib.request.urlopen(request, timeout=_remaining(PROBE_TIMEOUT_S)) as response:
            return "available" if response.status == 200 else "degraded"
    except (urllib.error.URLError, OSError, ValueError):
        return "degraded"


def context_line(runtime: str, arguments: dict[str, str], status: str) -> str:
    line = f"{TAG} runtime={runtime} vera={status}"
    if status == "degraded":
        line += " (VERA API unreachable or not ready: continue without VERA and say so once)"
    if arguments:
        line += " knowledge_bootstrap arguments: " + json.dumps(arguments, sort_keys=True)
    else:
        line += " (no Git repository identity; bootstrap without repository arguments)"
    return line


def pre_tool_use() -> int:
    try:
        event = json.loads(sys.stdin.read(MAX_EVENT_BYTES))
        persist = event["tool_input"].get("persist", False)
        decision = "allow" if persist is False else "ask"
    except BaseException:
        decision = "ask"  # fail closed: a write never goes through unasked
    reason = ("VERA retrieval (persist=false) is read-only" if decision == "allow" else
              "VERA persisted context writes a context pack: confirm")
    sys.stdout.write(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": decision,
        "permissionDecisionReason": reason}}) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["pre-tool-use"]:
        return pre_tool_use()
    parser = argparse.ArgumentParser(prog="vera_hook.py")
    parser.add_argument("event", choices=["session-start"])
    parser.add_argument("--runtime", required=True)
    parser.add_argument("--api-url")
    try:
        options = parser.parse_args(argv)
        runtime = options.runtime
        line = context_line(
            runtime, bootstrap_arguments(_event_cwd()), vera_status(options.api_url)
        )
    except BaseException:
        runtime = "unknown"
        line = f"{TAG} vera=degraded (the VERA hook failed; continue without VERA)"
    output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": line}}
    sys.stdout.write(json.dumps(output) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
