"""The shipped versioned defaults agree with the GUIDE, and overrides are explicit and reviewed."""

from __future__ import annotations

import pytest
from guide_seed import section, table_rows

from vera.errors import InvalidInput
from vera.integrations.contract import (
    SAVE_MODES,
    apply_overrides,
    contract_version,
    credential_scopes,
    load_contract,
    save_mode,
)


def guide_defaults_block() -> dict:
    """The GUIDE's Versioned Defaults block (YAML-shaped: top-level keys, one nesting level)."""
    text = section("Versioned Defaults", "Tool Visibility Profiles")
    block = text[text.index("vera_integration_contract:") : text.index("A runtime MAY override")]
    parsed: dict = {}
    current: dict | None = None
    for raw in block.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        key, _, value = line.strip().partition(":")
        value = value.strip()
        scalar = {"true": True, "false": False}.get(value, int(value) if value.isdigit() else value)
        if raw.startswith(" "):
            assert current is not None
            current[key] = scalar
        elif value:
            parsed[key] = scalar
        else:
            current = parsed[key] = {}
    return parsed


def test_shipped_contract_is_the_guides_versioned_defaults_block() -> None:
    assert load_contract() == guide_defaults_block()


def test_contract_version_and_default_save_mode() -> None:
    contract = load_contract()
    assert contract_version(contract) == 1
    assert save_mode(contract) == "suggest"


def test_save_modes_are_the_guides_memory_save_table() -> None:
    rows = table_rows(
        section("Memory-save Contract", "Operational Records and Audit Policy"), "Mode"
    )
    assert tuple(row[0] for row in rows) == SAVE_MODES


def test_prose_agrees_with_the_privacy_and_write_defaults() -> None:
    contract = load_contract()
    privacy = section("Privacy and Data Handling", "Runtime Support and Capability Matrix")
    assert "never forwarded by default" in privacy
    assert contract["context"]["prompt_forwarding"] is False
    assert contract["context"]["transcript_forwarding"] is False
    hooks = section("Hook Requirements", "Memory-save Contract")
    assert "MUST fail open" in hooks and contract["context"]["failure_mode"] == "fail_open"
    assert contract["writes"]["shared_promotion"] == "forbidden"


def test_a_reviewed_override_is_applied_and_returned_for_the_ownership_record() -> None:
    contract = load_contract()
    effective, reviewed = apply_overrides(contract, {"defaults.save_mode": "auto-propose"})
    assert save_mode(effective) == "auto-propose"
    assert reviewed == {"defaults.save_mode": "auto-propose"}
    assert save_mode(contract) == "suggest"  # the input is not mutated


def test_an_override_equal_to_the_default_is_not_recorded() -> None:
    _, reviewed = apply_overrides(load_contract(), {"defaults.save_mode": "suggest"})
    assert reviewed == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("defaults.save_mode", "always"),
        ("context.prompt_forwarding", "true"),
        ("writes.shared_promotion", "allowed"),
        ("defaults.system_prompt", "replaced"),
        ("nonsense", "x"),
    ],
)
def test_an_override_outside_the_contract_is_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        apply_overrides(load_contract(), {key: value})
    assert caught.value.field == key


@pytest.mark.parametrize("mode", SAVE_MODES)
def test_only_a_runtime_that_asks_per_call_may_persist(mode: str) -> None:
    """Codex and OpenCode approve per tool, so they cannot ask for persist=true alone: their
    credential lacks memory:snapshot and the server refuses persisting for them; Claude
    Code's hook asks per call, so it keeps what its mode allows (ADR 0019)."""
    claude = credential_scopes("claude-code", mode)
    assert ("memory:snapshot" in claude) == (mode != "off")
    for runtime in ("codex", "opencode"):
        assert credential_scopes(runtime, mode) == tuple(
            scope for scope in claude if scope != "memory:snapshot")
