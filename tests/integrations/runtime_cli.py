"""Read-only calls of the real runtime CLIs that show what each runtime makes of a project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import tomlkit

# The test stands in for the person who approves the project server; doctor never does.
HEALTH_SETTINGS = json.dumps({"enableAllProjectMcpServers": True})


def run(bin_dir: Path, argv: list[str], root: Path, env: dict[str, str]
        ) -> subprocess.CompletedProcess:
    env = {**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}"}
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def claude_get(bin_dir: Path, root: Path, env: dict[str, str]) -> str:
    done = run(bin_dir, ["claude", "--settings", HEALTH_SETTINGS, "mcp", "get", "vera"],
               root, env)
    return done.stdout + done.stderr


def trust_claude_folder(root: Path, env: dict[str, str]) -> None:
    """The trust dialog a person accepts once in Claude Code (it runs the project's
    headers helper only after it); tests accept it in a temp home."""
    state_file = Path(env["HOME"]) / ".claude.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    state.setdefault("projects", {}).setdefault(str(root), {})["hasTrustDialogAccepted"] = True
    state_file.write_text(json.dumps(state))


def approve_claude_server(root: Path, env: dict[str, str]) -> None:
    """Folder trust plus the per-server approval a person gives in Claude Code (/mcp)."""
    trust_claude_folder(root, env)
    local = root / ".claude" / "settings.local.json"
    local.parent.mkdir(exist_ok=True)
    local.write_text(json.dumps({"enabledMcpjsonServers": ["vera"]}))


def trust_codex_project(root: Path, env: dict[str, str]) -> None:
    """The user-home approval a person gives in Codex; tests give it in a temp home."""
    config = Path(env["CODEX_HOME"]) / "config.toml"
    doc = tomlkit.parse(config.read_text()) if config.exists() else tomlkit.document()
    doc.setdefault("projects", tomlkit.table(is_super_table=True))[str(root)] = {
        "trust_level": "trusted"}
    config.write_text(tomlkit.dumps(doc))


def codex_get(bin_dir: Path, root: Path, env: dict[str, str]) -> dict | None:
    done = run(bin_dir, ["codex", "mcp", "get", "vera", "--json"], root, env)
    return json.loads(done.stdout) if done.returncode == 0 else None


def opencode_config(bin_dir: Path, root: Path, env: dict[str, str]
                    ) -> subprocess.CompletedProcess:
    return run(bin_dir, ["opencode", "debug", "config"], root, env)


def opencode_list(bin_dir: Path, root: Path, env: dict[str, str]) -> str:
    done = run(bin_dir, ["opencode", "mcp", "list"], root, env)
    return done.stdout + done.stderr
