"""OpenCode: ``mcp.vera`` in the project ``opencode.json`` or ``opencode.jsonc``; no trust
gate, so what the file says is what runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NAME = "opencode"
CLI = "opencode"
SERVER_PATH = ("mcp", "vera")
# OpenCode adds this key to a config file that lacks it, so a file VERA creates carries it
# from the start (and VERA owns it), rather than being left behind after disconnect.
NEW_FILE_KEYS = {"$schema": "https://opencode.ai/config.json"}
# ``{file:…}`` is resolved against the config file's folder, the repository root, when
# OpenCode starts; VERA's plugin (its ``config`` hook, which runs before the MCP servers
# connect) replaces that header with a token from ``vera mcp-token``, minted again when
# it ends soon. A token that ends while OpenCode runs holds until OpenCode restarts.
REFRESH = ("VERA's OpenCode plugin runs `vera mcp-token` when OpenCode starts; a token "
           "that ends while it runs needs a restart")
APPROVAL = ("retrieval runs without a click; OpenCode approves per tool only, so "
            "knowledge_get_context asks every time (headless `opencode run` cannot call it: "
            "use knowledge_search there); writes ask as the save mode says")


def mcp_file(root: Path) -> str:
    return "opencode.jsonc" if (root / "opencode.jsonc").exists() else "opencode.json"


def server_definition(mcp_url: str, authenticated: bool) -> dict[str, Any]:
    server: dict[str, Any] = {"type": "remote", "url": mcp_url, "enabled": True}
    if authenticated:
        server["oauth"] = False
        server["headers"] = {"Authorization": "Bearer {file:.vera/mcp-token}"}
    return server


def equivalent(existing: Any, wanted: dict[str, Any]) -> bool:
    return (isinstance(existing, dict) and existing.get("type") == "remote"
            and existing.get("url") == wanted["url"]
            and existing.get("enabled", True) is not False
            and (existing.get("headers") or {}) == wanted.get("headers", {}))


def probe(root: Path, env: dict[str, str], run_cli: Any, finding: Any) -> list[Any]:
    listed = run_cli([CLI, "mcp", "list"], root, env)
    if listed.returncode == 127:
        return [finding("opencode cli", False, "install OpenCode (opencode) to check")]
    line = next((ln for ln in (listed.stdout + listed.stderr).splitlines() if "vera" in ln), "")
    connected = "connected" in line and "✓" in line
    return [finding("opencode connects to vera", connected, "connected" if connected else
                    f"OpenCode reports: {line.strip() or 'no vera server'}")]
