"""What each runtime gets from VERA besides its MCP server entry: the behaviour skill, the
SessionStart hook, and the write-approval rules, rendered for the contract's save mode.

``render`` returns a list of ``Artifact``. ``path`` is project-relative with ``/``
separators. ``kind`` says how connect applies it:

- ``file``: ``content`` is the whole text of a file VERA owns.
- ``json-merge`` / ``toml-merge``: ``content`` is the nested mapping of what VERA owns in
  that file. Mappings merge key by key; a list contributes its items (appended, an equal
  existing item is reused); any other value is set, and an existing different value is a
  conflict for the user to resolve.

The MCP server definition itself (endpoint, credentials) belongs to the runtime adapters;
the ``toml-merge`` for Codex adds only its approval keys to ``[mcp_servers.vera]``.
"""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from vera import repository_identity
from vera.errors import InvalidInput
from vera.integrations.contract import save_mode
from vera.integrations.skill import render_skill

ArtifactKind = Literal["file", "json-merge", "toml-merge"]
RUNTIMES = ("claude-code", "codex", "opencode")
SERVER_NAME = "vera"

# Every tool whose readOnlyHint is false, across all profiles (a rule for a tool the active
# profile hides is harmless). knowledge_get_context is here because persist=true writes.
WRITE_TOOLS = (
    "knowledge_get_context",
    "knowledge_propose",
    "knowledge_feedback",
    "knowledge_retract_proposal",
    "knowledge_create_snapshot",
    "memory_propose",
    "memory_feedback",
)
PROPOSAL_TOOLS = ("knowledge_propose", "memory_propose")
# Writes only with persist=true (ADR 0019). Claude Code decides per call (its PreToolUse
# hook asks for persist=true). Codex and OpenCode approve per tool, so their credential
# cannot persist (contract.credential_scopes) and the server refuses persist=true for them:
# for them the tool is a read. Codex learns that from the read-only annotation the server
# derives from its token (its `writes` mode then asks nothing); OpenCode has no such mode,
# so its rule allows the tool.
PER_CALL_TOOLS = ("knowledge_get_context",)
# The coding profile's read-only tools: retrieval runs without a click, headless included.
READ_TOOLS = (
    "knowledge_bootstrap",
    "knowledge_search",
    "knowledge_get_context_pack",
    "knowledge_explain_fact",
    "knowledge_get_evidence",
    "knowledge_proposal_report",
)
# A bounded hook keeps the runtime's 600 s default from ever stalling a session start.
HOOK_TIMEOUT_S = 5
HOOK_SCRIPT = "vera_hook.py"


@dataclass(frozen=True)
class Artifact:
    path: str
    kind: ArtifactKind
    content: str | Mapping[str, Any]


def write_decisions(mode: str) -> dict[str, str]:
    """Per write tool, what the client does before a call: ask, allow or deny.

    off forbids proposals; suggest asks for every write; auto-propose lets proposals to the
    personal pending scope through and still asks for every other write.
    """
    proposal = {"off": "deny", "suggest": "ask", "auto-propose": "allow"}[mode]
    return {tool: proposal if tool in PROPOSAL_TOOLS else "ask" for tool in WRITE_TOOLS}


def hook_source() -> str:
    """The hook script with ``vera.repository_identity`` inlined: the hook must run without
    VERA installed, and the sanitizing rule keeps one home."""
    template = resources.files("vera.integrations").joinpath(f"assets/{HOOK_SCRIPT}").read_text()
    rule = inspect.getsource(repository_identity).split("from __future__ import annotations\n", 1)
    return template.replace("# __REPOSITORY_IDENTITY__\n", rule[1])


def plugin_source() -> str:
    return resources.files("vera.integrations").joinpath("assets/vera-bootstrap.js").read_text()


def _session_start_command(script: str, runtime: str, api_url: str) -> str:
    return f"python3 {script} session-start --runtime {runtime} --api-url {shlex.quote(api_url)}"


def _claude_code(mode: str, api_url: str) -> list[Artifact]:
    decisions = write_decisions(mode)
    permissions: dict[str, list[str]] = {
        "allow": [f"mcp__{SERVER_NAME}__{tool}" for tool in READ_TOOLS]}
    for tool, decision in decisions.items():
        if tool not in PER_CALL_TOOLS:  # an ask rule would beat the hook's allow
            permissions.setdefault(decision, []).append(f"mcp__{SERVER_NAME}__{tool}")
    script = f'"$CLAUDE_PROJECT_DIR/.claude/hooks/{HOOK_SCRIPT}"'
    command = _session_start_command(script, "claude-code", api_url)
    settings = {
        "hooks": {
            "SessionStart": [
                {
                    "matcher": "startup|resume|clear|compact",
                    "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}],
                }
            ],
            "PreToolUse": [
                {
                    "matcher": "|".join(f"mcp__{SERVER_NAME}__{t}" for t in PER_CALL_TOOLS),
                    "hooks": [{"type": "command", "command": f"python3 {script} pre-tool-use",
                               "timeout": HOOK_TIMEOUT_S}],
                }
            ],
        },
        "permissions": permissions,
    }
    return [
        Artifact(".claude/skills/vera/SKILL.md", "file", render_skill(mode)),
        Artifact(f".claude/hooks/{HOOK_SCRIPT}", "file", hook_source()),
        Artifact(".claude/settings.json", "json-merge", settings),
    ]


def _codex(mode: str, api_url: str) -> list[Artifact]:
    server: dict[str, Any] = {"default_tools_approval_mode": "writes"}
    decisions = write_decisions(mode)
    denied = [tool for tool, decision in decisions.items() if decision == "deny"]
    if denied:
        server["disabled_tools"] = denied
    allowed = [tool for tool, decision in decisions.items() if decision == "allow"]
    if allowed:
        server["tools"] = {tool: {"approval_mode": "approve"} for tool in allowed}
    command = _session_start_command(
        f'"$(git rev-parse --show-toplevel)/.codex/hooks/{HOOK_SCRIPT}"', "codex", api_url
    )
    hooks = {
        "hooks": {
            "SessionStart": [
                {
                    "matcher": "startup|resume",
                    "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}],
                }
            ]
        }
    }
    return [
        Artifact(".agents/skills/vera/SKILL.md", "file", render_skill(mode)),
        Artifact(f".codex/hooks/{HOOK_SCRIPT}", "file", hook_source()),
        Artifact(".codex/hooks.json", "json-merge", hooks),
        Artifact(".codex/config.toml", "toml-merge", {"mcp_servers": {SERVER_NAME: server}}),
    ]


# Outside .opencode/ on purpose: OpenCode installs its plugin SDK from npm into every
# .opencode/ folder it finds at each start; VERA's plugin imports nothing, is listed in the
# config by path, and so makes OpenCode fetch nothing (tests/integrations/test_opencode_fetch.py).
OPENCODE_DIR = ".vera/opencode"
OPENCODE_PLUGIN = f"{OPENCODE_DIR}/vera-bootstrap.js"
# OpenCode also reads Claude Code's and Codex's skill folders, where a skill named ``vera``
# is written for their save modes: OpenCode's own has its own name, in a folder the plugin
# adds to OpenCode's skill paths, and the others' ``vera`` is hidden from its model.
OPENCODE_SKILL = "vera-opencode"


def _opencode(mode: str, api_url: str) -> list[Artifact]:
    permission: dict[str, Any] = {
        f"{SERVER_NAME}_{tool}": "allow" if tool in PER_CALL_TOOLS else d
        for tool, d in write_decisions(mode).items()}
    permission["skill"] = {SERVER_NAME: "deny"}
    plugin = plugin_source().replace("__VERA_API_URL__", json.dumps(api_url))
    return [
        Artifact(f"{OPENCODE_DIR}/skills/{OPENCODE_SKILL}/SKILL.md", "file",
                 render_skill(mode, OPENCODE_SKILL)),
        Artifact(f"{OPENCODE_DIR}/{HOOK_SCRIPT}", "file", hook_source()),
        Artifact(OPENCODE_PLUGIN, "file", plugin),
        Artifact("opencode.json", "json-merge",
                 {"plugin": [f"./{OPENCODE_PLUGIN}"], "permission": permission}),
    ]


_RENDERERS = {"claude-code": _claude_code, "codex": _codex, "opencode": _opencode}


def render(runtime: str, contract: Mapping[str, Any], *, api_url: str) -> list[Artifact]:
    """The artifacts ``runtime`` gets for ``contract`` (the effective, reviewed contract)."""
    renderer = _RENDERERS.get(runtime)
    if renderer is None:
        raise InvalidInput("runtime", f"runtime must be one of {', '.join(RUNTIMES)}")
    return renderer(save_mode(contract), api_url)
