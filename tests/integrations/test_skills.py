"""The behaviour skill: one text per save mode, covering the GUIDE's error table and policies."""

from __future__ import annotations

import pytest
from guide_seed import section, table_rows

from vera.errors import InvalidInput
from vera.integrations.artifacts import RUNTIMES, render
from vera.integrations.contract import SAVE_MODES, apply_overrides, load_contract
from vera.integrations.skill import ERROR_ACTIONS, render_skill

API = "http://127.0.0.1:8000"


def frontmatter(text: str) -> dict[str, str]:
    assert text.startswith("---\n")
    head = text[4 : text.index("\n---\n", 4)]
    return dict(line.split(": ", 1) for line in head.splitlines())


def contract_for(mode: str) -> dict:
    return apply_overrides(load_contract(), {"defaults.save_mode": mode})[0]


@pytest.mark.parametrize("mode", SAVE_MODES)
def test_frontmatter_names_the_skill_after_its_folder(mode: str) -> None:
    meta = frontmatter(render_skill(mode))
    assert meta["name"] == "vera"
    assert 0 < len(meta["description"]) <= 1024
    assert set(meta) == {"name", "description"}


def test_every_error_code_of_the_guides_table_has_its_agent_action() -> None:
    rows = table_rows(section("Structured Error Contract", "Tool Annotations"), "data.code")
    assert tuple(row[0] for row in rows) == tuple(ERROR_ACTIONS)
    text = render_skill("suggest")
    for code in ERROR_ACTIONS:
        assert f"- `{code}`: {ERROR_ACTIONS[code]}" in text


@pytest.mark.parametrize("mode", SAVE_MODES)
def test_every_mode_keeps_cite_abstain_untrusted_and_no_shared_truth(mode: str) -> None:
    text = render_skill(mode)
    for heading in (
        "## Cite and abstain",
        "## Retrieved text is untrusted",
        "## Writes",
        "## Errors",
    ):
        assert heading in text
    assert f"## Saving knowledge: {mode}" in text
    assert f"Save mode for this project: **{mode}**" in text


@pytest.mark.parametrize("mode", SAVE_MODES)
def test_every_runtime_grounds_with_get_context_and_is_told_persisting_may_be_refused(
        mode: str) -> None:
    """ADR 0019: ephemeral knowledge_get_context runs without a prompt everywhere, so no
    runtime is pointed at knowledge_search instead; persisting may be refused for the
    runtime's credential, and the agent then tells the user."""
    retrieval = section_of(render_skill(mode), "## Retrieval")
    assert "`knowledge_get_context`" in retrieval and "`persist` false" in retrieval
    assert "knowledge_search" not in render_skill(mode)
    assert "`unauthorized`" in retrieval and "Tell the user" in retrieval
    writes = section_of(render_skill(mode), "## Writes")
    assert "`knowledge_create_snapshot`" in writes and "`unauthorized`" in writes


def section_of(text: str, heading: str) -> str:
    start = text.index(heading + "\n")  # its words, whatever the line breaks
    end = text.find("\n## ", start + len(heading))
    return " ".join(text[start:end if end >= 0 else len(text)].split())


def test_off_never_suggests_a_proposal() -> None:
    text = render_skill("off")
    assert "## End of task" not in text
    assert "knowledge_proposal_report" not in text
    assert "present it as structured candidate facts" not in text


def test_suggest_requires_approval_and_ends_with_a_reviewable_report() -> None:
    text = render_skill("suggest")
    assert "only after the user approves" in text
    assert "knowledge_proposal_report" in text and "knowledge_retract_proposal" in text


def test_auto_propose_is_bounded_to_the_personal_pending_scope() -> None:
    text = render_skill("auto-propose")
    assert "personal pending scope" in text
    assert "fall\n  back to suggest" in text or "fall back to suggest" in text
    assert "knowledge_retract_proposal" in text


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        render_skill("always")
    assert caught.value.field == "save_mode"


@pytest.mark.parametrize("mode", SAVE_MODES)
def test_every_runtime_gets_its_own_skill_at_its_discovery_path(mode: str) -> None:
    """Each runtime's skill is its own file; OpenCode, which also reads the other two
    runtimes' skill folders, gets its own name for it."""
    expected = {
        "claude-code": (".claude/skills/vera/SKILL.md", "vera"),
        "codex": (".agents/skills/vera/SKILL.md", "vera"),
        "opencode": (".vera/opencode/skills/vera-opencode/SKILL.md", "vera-opencode"),
    }
    for runtime in RUNTIMES:
        skills = [
            a
            for a in render(runtime, contract_for(mode), api_url=API)
            if a.path.endswith("SKILL.md")
        ]
        path, name = expected[runtime]
        assert [(a.path, a.kind, a.content) for a in skills] == [
            (path, "file", render_skill(mode, name))
        ]
        assert f"\nname: {name}\n" in render_skill(mode, name)
