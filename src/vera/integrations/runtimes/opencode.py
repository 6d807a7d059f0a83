"""OpenCode: ``mcp.vera`` in the project ``opencode.json`` or ``opencode.jsonc``; no trust
gate, so what the file says is what runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vera.integrations import editors
from vera.integrations.editors import UnsafeEdit
from vera.integrations.ownership import credential_files
from vera.integrations.runtimes import scopes
from vera.integrations.runtimes.scopes import ScopeIssue

NAME = "opencode"
CLI = "opencode"
SERVER_PATH = ("mcp", "vera")
# OpenCode adds this key to a config file that lacks it, so a file VERA creates carries it
# from the start (and VERA owns it), rather than being left behind after disconnect.
NEW_FILE_KEYS = {"$schema": "https://opencode.ai/config.json"}
CONFIG_KEYS: dict[str, Any] = {}
# ``{file:…}`` is resolved against the config file's folder, the repository root, when
# OpenCode starts; VERA's plugin (its ``config`` hook, which runs before the MCP servers
# connect) replaces that header with a token from ``vera mcp-token``, minted again when
# it ends soon. A token that ends while OpenCode runs holds until OpenCode restarts.
REFRESH = ("VERA's OpenCode plugin runs `vera mcp-token --runtime opencode` when OpenCode "
           "starts; a token that ends while it runs needs a restart")
APPROVAL = ("retrieval and knowledge_get_context run without a click (OpenCode approves "
            "per tool only, so its credential cannot persist: the server refuses "
            "persist=true); writes ask as the save mode says")


# OpenCode's managed config folder on Linux; its own test variable moves it.
MANAGED_DIR = Path("/etc/opencode")
CONFIG_NAMES = ("config.json", "opencode.json", "opencode.jsonc")


def serves_as_is(path: tuple[str, ...], current: Any) -> bool:
    """No user value stands in for one VERA sets here."""
    return False


def _config_dirs(env: dict[str, str]) -> tuple[Path, Path]:
    """The user's config folder and the managed one, where OpenCode itself looks."""
    home = Path(env.get("HOME", str(Path.home())))
    user = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    managed = env.get("OPENCODE_TEST_MANAGED_CONFIG_DIR")
    return user, Path(managed) if managed else MANAGED_DIR


# Keys every project server VERA writes sets, so a user's value for them is replaced.
REPLACED_KEYS = frozenset({"type", "url", "enabled"})


def _vera_server(config: Path) -> dict[str, Any] | None:
    try:
        document = editors.parse_json(config.read_text())
    except (OSError, UnsafeEdit):
        return None
    servers = document.get(SERVER_PATH[0]) if isinstance(document, dict) else None
    server = servers.get(SERVER_PATH[1]) if isinstance(servers, dict) else None
    return server if isinstance(server, dict) else None


def scope_issues(root: Path, env: dict[str, str]) -> list[ScopeIssue]:
    """OpenCode merges its config files key by key: global, then the project's, then the
    managed folder's, which wins over both."""
    user, managed = _config_dirs(env)
    issues = []
    extra = [Path(env["OPENCODE_CONFIG"])] if env.get("OPENCODE_CONFIG") else []
    for config in [*(user / name for name in CONFIG_NAMES), *extra]:
        server = _vera_server(config)
        if server is None:
            continue
        merged = sorted(set(server) - REPLACED_KEYS)
        issues.append(ScopeIssue(scopes.MERGING_USER_SERVER, True, (
            f"{config} defines mcp.vera with {', '.join(merged)}, which OpenCode merges "
            "into the project's server: remove it there, then connect again"))
            if merged else ScopeIssue(scopes.OVERRIDDEN_USER_SERVER, False, (
                f"{config} defines mcp.vera; in this project OpenCode uses the project's "
                "url instead")))
    for config in (managed / name for name in CONFIG_NAMES[1:]):
        if _vera_server(config) is not None:
            issues.append(ScopeIssue(scopes.SHADOWING_MANAGED_SERVER, True, (
                f"{config} defines mcp.vera, which overrides the project's; ask its "
                "administrator")))
    return issues


def mcp_file(root: Path) -> str:
    return "opencode.jsonc" if (root / "opencode.jsonc").exists() else "opencode.json"


def server_definition(mcp_url: str, authenticated: bool) -> dict[str, Any]:
    server: dict[str, Any] = {"type": "remote", "url": mcp_url, "enabled": True}
    if authenticated:
        server["oauth"] = False
        token_file = credential_files(NAME).token
        server["headers"] = {"Authorization": f"Bearer {{file:{token_file}}}"}
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
