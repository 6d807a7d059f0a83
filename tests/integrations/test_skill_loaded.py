"""Each real runtime hands VERA's behaviour skill (the one connect installs) to its model.

A headless session per runtime against a scripted model that records every request. None
of the three puts the skill's body into the first request: each loads skills on demand and
lists them by name and description, each in its own place, which is what is asserted:

- Claude Code: a ``<system-reminder>`` in the first user message lists the skills "available
  for use with the Skill tool" (``- vera: <description>``), and the ``Skill`` tool is offered;
  the body is sent only when the model calls that tool.
- Codex: the developer message lists the skills with name, description and the SKILL.md
  path (a short root id from its skill-roots table), which the model reads with its shell
  tool when it uses one.
- OpenCode: the system prompt lists the available skills (``<available_skills>``, name and
  description) and the ``skill`` tool is offered; the model calls it to load the body.
"""

from __future__ import annotations

import re
from pathlib import Path

import test_hooks_runtime_sessions as sessions
from runtime_fakes import FakeAnthropic, FakeChat, FakeResponses, FakeVera

from vera.integrations.skill import render_skill

opencode_home, opencode_plugin_sdk = sessions.opencode_home, sessions.opencode_plugin_sdk
vera, model, responses, chat = sessions.vera, sessions.model, sessions.responses, sessions.chat


def description(mode: str = "suggest") -> str:
    text = render_skill(mode)
    head = text[4:text.index("\n---\n", 4)]
    return dict(line.split(": ", 1) for line in head.splitlines())["description"]


def test_claude_code_lists_the_vera_skill_to_its_model(
        tmp_path: Path, vera: FakeVera, model: FakeAnthropic) -> None:
    root = sessions.project(tmp_path, "claude-code", "suggest", vera)
    home = tmp_path / "home"
    home.mkdir()
    done = sessions.run_claude(root, home, model)
    assert done.returncode == 0, done.stderr[-2000:]
    main = [b for b in model.bodies if any(t.get("name") == "Skill" for t in b.get("tools", []))]
    assert main, "Claude Code never offered its Skill tool"
    listing = [t for t in sessions.context_messages(model) if "Skill tool" in t]
    assert any(f"- vera: {description()}" in t for t in listing), listing[:1]


def test_codex_lists_the_vera_skill_to_its_model(
        tmp_path: Path, vera: FakeVera, responses: FakeResponses) -> None:
    root = sessions.project(tmp_path, "codex", "suggest", vera)
    done = sessions.run_codex(root, tmp_path, responses)
    assert done.returncode == 0, done.stderr[-2000:]
    developer = "\n".join(sessions.developer_messages(responses))
    # The listing names a skill root by a short id, then the skill by "<id>/vera/SKILL.md".
    found = re.search(rf"- `(r\d+)` = `{re.escape(str(root / '.agents' / 'skills'))}`",
                      developer)
    assert found, "the repository's .agents/skills is not among Codex's skill roots"
    assert f"- vera: {description()} (file: {found.group(1)}/vera/SKILL.md)" in developer


def test_opencode_lists_its_own_vera_skill_to_its_model(
        tmp_path: Path, opencode_home: Path, opencode_plugin_sdk: Path, vera: FakeVera,
        chat: FakeChat) -> None:
    """OpenCode also reads Claude Code's and Codex's skill folders: with both runtimes
    connected in another save mode, its model is offered OpenCode's own skill alone."""
    root = sessions.project(tmp_path, "opencode", "suggest", vera)
    for folder in (".claude", ".agents"):  # the other runtimes' skill, in save mode off
        skill = root / folder / "skills" / "vera" / "SKILL.md"
        skill.parent.mkdir(parents=True)
        skill.write_text(render_skill("off"))
    sessions.configure_opencode(root, vera, chat)
    offered = sessions.opencode_session(root, opencode_home, vera, chat)
    assert "vera_knowledge_search" in offered, sessions.mcp_trace(vera)
    skill_tools = [t["function"] for b in chat.bodies for t in b.get("tools", [])
                   if t["function"]["name"] == "skill"]
    assert skill_tools, "OpenCode never offered its skill tool"
    system = "\n".join(str(m.get("content")) for b in chat.bodies
                       for m in b.get("messages", []) if m.get("role") == "system")
    start = system.find("<available_skills>")
    listing = system[start:system.find("</available_skills>", start)]
    assert start >= 0, system[-3000:]
    assert "<name>vera-opencode</name>" in listing and description() in listing, listing
    assert "<name>vera</name>" not in listing and description("off") not in listing, listing
