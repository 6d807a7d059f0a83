"""Codex: ``[mcp_servers.vera]`` in the project ``.codex/config.toml``, which Codex loads only
for a project trusted in the user config; project hooks additionally need per-hook hash
trust (``/hooks`` in Codex)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

NAME = "codex"
CLI = "codex"
NEW_FILE_KEYS: dict[str, str] = {}
SERVER_PATH = ("mcp_servers", "vera")


def mcp_file(root: Path) -> str:
    return ".codex/config.toml"


def server_definition(mcp_url: str, token_env: str | None) -> dict[str, Any]:
    server: dict[str, Any] = {"url": mcp_url}
    if token_env:
        server["bearer_token_env_var"] = token_env
    return server


def equivalent(existing: Any, wanted: dict[str, Any]) -> bool:
    return (isinstance(existing, dict) and existing.get("url") == wanted["url"]
            and existing.get("bearer_token_env_var") == wanted.get("bearer_token_env_var")
            and not existing.get("http_headers") and not existing.get("env_http_headers"))


def codex_home(env: dict[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path(env.get("HOME", str(Path.home()))) / ".codex")


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
    seen = isinstance(server, dict) and server.get("enabled", True) is not False
    findings.append(finding("codex sees vera", seen, "configured and enabled" if seen else
                            "Codex does not load the project's vera server"
                            + ("" if trusted else " until the project is trusted")))
    findings.append(finding("codex hook trust", False, "review the VERA SessionStart hook "
                            "with /hooks in Codex (per-hook hash trust)")
                    if os.path.exists(root / ".codex" / "hooks.json") else
                    finding("codex hook trust", True, "no project hooks"))
    return findings
