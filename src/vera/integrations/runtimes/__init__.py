"""One adapter per coding runtime: where its MCP server entry lives and in which shape,
which trust steps it gates project config behind, and how doctor asks its own CLI.

Each adapter module exposes the same names (``NAME``, ``CLI``, ``mcp_file``, ``SERVER_PATH``,
``NEW_FILE_KEYS`` (set only in a config file connect creates), ``CONFIG_KEYS`` (top-level
keys of the MCP config file VERA sets and owns), ``serves_as_is`` (a user's value VERA
keeps instead of its own), ``REFRESH``, ``APPROVAL``,
``server_definition``, ``equivalent``, ``probe``, ``scope_issues``); :data:`ADAPTERS` maps
runtime names to them.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from vera.integrations.runtimes import claude_code, codex, opencode

# How a person signs each runtime in through the deployment's identity provider (its own
# OAuth, in a browser): connect prints it, doctor names it.
OAUTH_STEP = {
    "claude-code": "authenticate in Claude Code with /mcp (OAuth)",
    "codex": "run `codex mcp login vera` (OAuth)",
    "opencode": "run `opencode mcp auth vera` (OAuth)",
}
CLI_TIMEOUT_SECONDS = 60

ADAPTERS: dict[str, ModuleType] = {
    claude_code.NAME: claude_code, codex.NAME: codex, opencode.NAME: opencode}


@dataclass(frozen=True)
class Finding:
    """One doctor line: ``ok`` or a named step the user still has to take."""

    name: str
    ok: bool
    detail: str


def run_cli(argv: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Runs a runtime CLI read-only in the project; a missing CLI is rc 127."""
    try:
        return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: not found on PATH")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]}: timed out")
