"""Codex: ``[mcp_servers.vera]`` in the project ``.codex/config.toml``, which Codex loads only
for a project trusted in the user config; project hooks additionally need per-hook hash
trust (``/hooks`` in Codex)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from vera.integrations.credentials import headers_command
from vera.integrations.runtimes import scopes
from vera.integrations.runtimes.scopes import ScopeIssue

NAME = "codex"
CLI = "codex"
NEW_FILE_KEYS: dict[str, str] = {}
SERVER_PATH = ("mcp_servers", "vera")
MANAGED_REQUIREMENTS = Path("/etc/codex/requirements.toml")
# Codex's layers below the project's (merged into it key by key) and the one above it.
SYSTEM_CONFIG = Path("/etc/codex/config.toml")
MANAGED_CONFIG = Path("/etc/codex/managed_config.toml")
# Codex runs ``http_headers_helper`` with ``sh -c`` in the session's folder when it connects
# (and once more after a 401 or 403), and sends the header object it prints: no token in
# the environment, nothing in a shell profile.
HEADERS_HELPER = headers_command(NAME)
# Codex waits for a tool call's answer for ever unless told otherwise (a VERA that accepted
# the call and hangs would hang the session): the gateway's request budget (30 s by default)
# and a margin, after which the model is told the call timed out and goes on (fail-open).
TOOL_TIMEOUT_SECONDS = 45
# How long Codex waits for the server's first answers (initialize, tools/list) before a
# session starts without it: its 10 s default includes running the headers helper, a cold
# `vera mcp-token` that a loaded machine can take seconds to start; a session that began
# without VERA's tools cannot ground. A VERA that is down refuses at once, so this delays
# only a VERA that accepts the connection and does not answer.
STARTUP_TIMEOUT_SECONDS = 30
# How long Codex holds the first turn for a server still starting before that turn goes
# without its tools: 1 s by default (since 0.147), less than a cold headers helper takes on
# a loaded machine, and a session whose first turn lacks VERA's tools cannot ground. A
# top-level key (it holds every optional server of the session, so it is bounded at Codex's
# own default startup time, not VERA's 30 s); a VERA that is down refuses at once.
STARTUP_GRACE_MS = 10_000
GRACE_KEY = "mcp_optional_startup_grace_ms"
CONFIG_KEYS: dict[str, Any] = {GRACE_KEY: STARTUP_GRACE_MS}
REFRESH = (f"Codex runs `{HEADERS_HELPER}` (http_headers_helper) when it connects and "
           "again after a refusal")
APPROVAL = ("retrieval and knowledge_get_context run without a click (Codex approves per "
            "tool only, so its credential cannot persist: the server lists the tool read-only "
            "for it and refuses persist=true); writes ask as the save mode says")


def serves_as_is(path: tuple[str, ...], current: Any) -> bool:
    """Whether the user's own value at ``path`` already does what VERA's would, so connect
    keeps it (and does not own it) and doctor accepts it: a startup grace that waits at
    least as long (0 waits for each server's own startup timeout)."""
    return (path == (GRACE_KEY,) and isinstance(current, int)
            and not isinstance(current, bool) and (current == 0 or current >= STARTUP_GRACE_MS))


def mcp_file(root: Path) -> str:
    return ".codex/config.toml"


def server_definition(mcp_url: str, authenticated: bool) -> dict[str, Any]:
    server: dict[str, Any] = {"url": mcp_url, "tool_timeout_sec": TOOL_TIMEOUT_SECONDS,
                              "startup_timeout_sec": STARTUP_TIMEOUT_SECONDS}
    if authenticated:
        server["http_headers_helper"] = HEADERS_HELPER
    return server


def equivalent(existing: Any, wanted: dict[str, Any]) -> bool:
    return (isinstance(existing, dict) and existing.get("url") == wanted["url"]
            and existing.get("http_headers_helper") == wanted.get("http_headers_helper")
            and existing.get("tool_timeout_sec") == wanted["tool_timeout_sec"]
            and existing.get("startup_timeout_sec") == wanted["startup_timeout_sec"]
            and not existing.get("bearer_token_env_var")
            and not existing.get("http_headers") and not existing.get("env_http_headers"))


def codex_home(env: dict[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path(env.get("HOME", str(Path.home()))) / ".codex")


# Keys every project server VERA writes sets, so a user's value for them is replaced.
REPLACED_KEYS = frozenset({"url", "tool_timeout_sec", "startup_timeout_sec"})


def _vera_server(config: Path) -> dict[str, Any] | None:
    try:
        document = tomlkit.parse(config.read_text()).unwrap()
    except (OSError, TOMLKitError):
        return None
    server = (document.get(SERVER_PATH[0]) or {}).get(SERVER_PATH[1])
    return server if isinstance(server, dict) else None


def scope_issues(root: Path, env: dict[str, str]) -> list[ScopeIssue]:
    """Codex merges its config layers table by table: a ``[mcp_servers.vera]`` in the user's
    or the system's config adds its keys (a bearer token variable, other headers) to the
    project's server, and the managed config's replaces the project's values."""
    issues = []
    for config in (codex_home(env) / "config.toml", SYSTEM_CONFIG):
        server = _vera_server(config)
        if server is None:
            continue
        merged = sorted(set(server) - REPLACED_KEYS)
        issues.append(ScopeIssue(scopes.MERGING_USER_SERVER, True, (
            f"{config} defines [mcp_servers.vera] with {', '.join(merged)}, which Codex "
            "merges into the project's server: remove it (`codex mcp remove vera` for your "
            "own config), then connect again")) if merged else ScopeIssue(
            scopes.OVERRIDDEN_USER_SERVER, False, (
                f"{config} defines [mcp_servers.vera]; in this project Codex uses the "
                "project's url instead")))
    if _vera_server(MANAGED_CONFIG) is not None:
        issues.append(ScopeIssue(scopes.SHADOWING_MANAGED_SERVER, True, (
            f"{MANAGED_CONFIG} defines [mcp_servers.vera], which overrides the project's; "
            "ask its administrator")))
    try:
        requirements = tomlkit.parse(MANAGED_REQUIREMENTS.read_text()).unwrap()
    except (OSError, TOMLKitError):
        requirements = {}
    allowed = requirements.get("mcp_servers")
    if isinstance(allowed, dict) and SERVER_PATH[1] not in allowed:
        issues.append(ScopeIssue(scopes.MANAGED_BLOCKS_SERVER, True, (
            f"{MANAGED_REQUIREMENTS} allows only the MCP servers it lists, and vera is not "
            "one; ask its administrator")))
    if requirements.get("allow_managed_hooks_only") is True:
        issues.append(ScopeIssue(scopes.MANAGED_BLOCKS_HOOKS, False, (
            f"{MANAGED_REQUIREMENTS} sets allow_managed_hooks_only: no SessionStart context "
            "in Codex; the approval rules still hold")))
    return issues


def trust_level(root: Path, env: dict[str, str]) -> str | None:
    try:
        config = tomlkit.parse((codex_home(env) / "config.toml").read_text()).unwrap()
    except (OSError, TOMLKitError):
        return None
    return ((config.get("projects") or {}).get(str(root)) or {}).get("trust_level")


def probe(root: Path, env: dict[str, str], run_cli: Any, finding: Any) -> list[Any]:
    trusted = trust_level(root, env) == "trusted"
    findings = [finding("codex project trust", trusted, "trusted" if trusted else
                        f"trust {root} in Codex (run `codex` there and accept, or add "
                        f'[projects."{root}"] trust_level = "trusted" to '
                        f"{codex_home(env) / 'config.toml'} yourself)")]
    got = run_cli([CLI, "mcp", "get", "vera", "--json"], root, env)
    if got.returncode == 127:
        return [*findings, finding("codex cli", False, "install Codex (codex) to check")]
    try:
        server = json.loads(got.stdout) if got.returncode == 0 else None
    except ValueError:
        server = None
    findings.append(_policy_finding(server, finding))
    seen = isinstance(server, dict) and server.get("enabled", True) is not False
    findings.append(finding("codex sees vera", seen, "configured and enabled" if seen else
                            "Codex does not load the project's vera server"
                            + ("" if trusted else " until the project is trusted")))
    if os.path.exists(root / ".codex" / "hooks.json"):
        findings.append(_hook_finding(root, env, finding))
    return findings


def _policy_finding(server: Any, finding: Any) -> Any:
    """What the organization's managed requirements forbid VERA's project setup; an admin's
    choice the user can only take up with the admin, never work around."""
    blocks = []
    reason = server.get("disabled_reason") if isinstance(server, dict) else None
    if isinstance(reason, str) and reason.startswith("requirements"):
        blocks.append(f"disables the vera server ({reason})")
    try:
        requirements = tomlkit.parse(MANAGED_REQUIREMENTS.read_text())
    except (OSError, TOMLKitError):
        requirements = tomlkit.document()
    if requirements.get("allow_managed_hooks_only") is True:
        blocks.append(f"blocks project hooks (allow_managed_hooks_only in "
                      f"{MANAGED_REQUIREMENTS})")
    return finding("codex managed policy", not blocks,
                   "; ".join(blocks) + "; ask its administrator" if blocks
                   else "none blocks vera")


def _hook_finding(root: Path, env: dict[str, str], finding: Any) -> Any:
    hooks = hook_trust(root, env)
    if hooks is None:
        return finding("codex hook trust", False, "Codex did not report its hooks; review "
                       "the VERA SessionStart hook with /hooks in Codex")
    vera = [h for h in hooks if h.get("source") == "project" and "vera_hook" in
            str(h.get("command"))]
    untrusted = [h for h in vera if h.get("trustStatus") != "trusted"]
    if not vera:
        return finding("codex hook trust", False, "Codex does not list the VERA hook")
    if untrusted:
        status = ", ".join(sorted({str(h.get("trustStatus")) for h in untrusted}))
        return finding("codex hook trust", False, f"the VERA SessionStart hook is {status}: "
                       "review and trust it with /hooks in Codex")
    return finding("codex hook trust", True, "trusted")


def hook_trust(root: Path, env: dict[str, str], timeout: float = 20.0) -> list[dict] | None:
    """Codex's own view of the project's hooks (``hooks/list`` of ``codex app-server``):
    ``trustStatus`` and ``currentHash`` per hook. None when Codex cannot be asked."""
    messages = [
        {"id": 1, "method": "initialize",
         "params": {"clientInfo": {"name": "vera-doctor", "version": "1"}}},
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(root)]}},
    ]
    try:
        server = subprocess.Popen([CLI, "app-server"], cwd=root, env=env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        return None
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        server.stdin.flush()
        # A reader thread, not select(): readline buffers lines select() cannot see.
        lines: queue.Queue[str] = queue.Queue()
        stdout = server.stdout

        def read() -> None:
            for received in stdout:
                lines.put(received)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") == 2:
                return _hooks(message.get("result") or {})
        return None
    finally:
        server.kill()
        server.wait()


def _hooks(result: dict[str, Any]) -> list[dict]:
    hooks: list[dict] = []
    for value in result.values():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict) and "trustStatus" in item:
                    hooks.append(item)
                elif isinstance(item, dict):
                    hooks.extend(_hooks(item))
    return hooks
