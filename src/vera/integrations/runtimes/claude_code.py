"""Claude Code: the ``vera`` server in the tracked ``.mcp.json``, approval gated by folder
trust and per-server approval (``~/.claude.json``, ``.claude/settings.local.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vera.integrations.credentials import headers_command
from vera.integrations.runtimes import scopes
from vera.integrations.runtimes.scopes import ScopeIssue

NAME = "claude-code"
CLI = "claude"
NEW_FILE_KEYS: dict[str, str] = {}
CONFIG_KEYS: dict[str, Any] = {}
SERVER_PATH = ("mcpServers", "vera")
# Claude Code runs the headers helper through the shell from wherever it was started (in
# the repository), at each connection: it prints the header object with a token that is
# minted again when it ends soon (vera.integrations.credentials).
HEADERS_HELPER = headers_command(NAME)
REFRESH = f"Claude Code runs `{HEADERS_HELPER}` (headersHelper) at each connection"
APPROVAL = ("retrieval runs without a click; knowledge_get_context is decided per call by "
            "the PreToolUse hook (persist=true asks); writes ask as the save mode says")
MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
# A managed server set is exclusive: with this file, Claude Code runs only its servers.
MANAGED_MCP = Path("/etc/claude-code/managed-mcp.json")


def serves_as_is(path: tuple[str, ...], current: Any) -> bool:
    """No user value stands in for one VERA sets here."""
    return False


def mcp_file(root: Path) -> str:
    return ".mcp.json"


def server_definition(mcp_url: str, authenticated: bool) -> dict[str, Any]:
    server: dict[str, Any] = {"type": "http", "url": mcp_url}
    if authenticated:
        server["headersHelper"] = HEADERS_HELPER
    return server


def equivalent(existing: Any, wanted: dict[str, Any]) -> bool:
    if not isinstance(existing, dict):
        return False
    kind = existing.get("type")
    kind = "http" if kind == "streamable-http" else kind
    return (kind == "http" and existing.get("url") == wanted["url"]
            and not existing.get("headers")
            and existing.get("headersHelper") == wanted.get("headersHelper"))


def _user_state(home: Path) -> dict[str, Any]:
    try:
        state = json.loads((home / ".claude.json").read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _user_project(root: Path, home: Path) -> dict[str, Any]:
    return (_user_state(home).get("projects") or {}).get(str(root)) or {}


def _servers(holder: Any) -> dict[str, Any]:
    servers = holder.get("mcpServers") if isinstance(holder, dict) else None
    return servers if isinstance(servers, dict) else {}


def scope_issues(root: Path, env: dict[str, str]) -> list[ScopeIssue]:
    """Claude Code picks one ``vera`` by scope, local over project over user (no merge);
    a managed server set replaces them all."""
    home = Path(env.get("HOME", str(Path.home())))
    state = home / ".claude.json"
    issues = []
    if SERVER_PATH[1] in _servers(_user_project(root, home)):
        issues.append(ScopeIssue(scopes.SHADOWING_LOCAL_SERVER, True, (
            f"{state} defines a vera server for {root} (local scope), which Claude Code "
            "uses instead of the project's: remove it with `claude mcp remove --scope local "
            "vera`, then connect again")))
    if SERVER_PATH[1] in _servers(_user_state(home)):
        issues.append(ScopeIssue(scopes.OVERRIDDEN_USER_SERVER, False, (
            f"{state} defines a vera server for every project (user scope); in this project "
            "Claude Code uses the project's instead")))
    try:
        managed = json.loads(MANAGED_MCP.read_text())
    except (OSError, ValueError):
        managed = None
    if managed is not None:
        code = (scopes.SHADOWING_MANAGED_SERVER if SERVER_PATH[1] in _servers(managed)
                else scopes.MANAGED_BLOCKS_SERVER)
        issues.append(ScopeIssue(code, True, (
            f"{MANAGED_MCP} fixes the MCP servers Claude Code runs"
            + (", its own vera included" if code == scopes.SHADOWING_MANAGED_SERVER else "")
            + "; ask its administrator")))
    for block in _managed_blocks():
        hooks = "hooks" in block
        issues.append(ScopeIssue(
            scopes.MANAGED_BLOCKS_HOOKS if hooks else scopes.MANAGED_BLOCKS_SERVER, not hooks,
            f"{MANAGED_SETTINGS} {block}" + ("; the permission rules still hold" if hooks
                                             else "; ask its administrator")))
    return issues


def _managed_blocks() -> list[str]:
    """What the organization's managed settings forbid VERA's project setup; an admin's
    choice the user can only take up with the admin, never work around."""
    try:
        policy = json.loads(MANAGED_SETTINGS.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(policy, dict):
        return []

    def names(key: str) -> set[Any] | None:
        entries = policy.get(key)
        if not isinstance(entries, list):
            return None
        return {e.get("serverName") for e in entries if isinstance(e, dict)}

    blocks = []
    allowed = names("allowedMcpServers")
    if (policy.get("allowManagedMcpServersOnly") is True or "vera" in (names(
            "deniedMcpServers") or set()) or (allowed is not None and "vera" not in allowed)):
        blocks.append("blocks the vera MCP server")
    if policy.get("allowManagedHooksOnly") is True or policy.get("disableAllHooks") is True:
        blocks.append("blocks project hooks (no SessionStart context, no write-approval hook)")
    return blocks


def probe(root: Path, env: dict[str, str], run_cli: Any, finding: Any) -> list[Any]:
    home = Path(env.get("HOME", str(Path.home())))
    blocks = _managed_blocks()
    detail = f"{'; '.join(blocks)} ({MANAGED_SETTINGS}); ask its administrator"
    findings = [finding("claude managed policy", not blocks,
                        detail if blocks else "none blocks vera")]
    # Asked as the user's own settings stand: doctor never switches on a trust-skipping
    # setting, so an unapproved server is reported, not connected.
    health = run_cli([CLI, "mcp", "get", "vera"], root, env)
    text = health.stdout + health.stderr
    if health.returncode == 127:
        return [*findings, finding("claude cli", False, "install Claude Code (claude) to check")]
    if health.returncode != 0:
        return [*findings, finding("claude sees vera", False, "Claude Code does not list a "
                                   "server named vera in .mcp.json")]
    project = _user_project(root, home)
    trusted = bool(project.get("hasTrustDialogAccepted"))
    findings.append(finding("claude folder trust", trusted, "trusted" if trusted else
                            "open `claude` in the repository and accept the folder trust "
                            "dialog"))
    pending = "Pending approval" in text
    findings.append(finding("claude server approval", not pending, "approved" if not pending
                            else "approve the vera server in Claude Code (/mcp) after trusting "
                            "the folder"))
    if not pending:
        connected = "Connected" in text and "Failed" not in text
        findings.append(finding("claude connects to vera", connected,
                                "connected" if connected else "Claude Code cannot connect: "
                                + _status_line(text)))
    return findings


def _status_line(text: str) -> str:
    for line in text.splitlines():
        if "Status" in line or "✘" in line:
            return line.strip()
    return "no status"
