"""The versioned integration defaults (``vera_integration_contract``), shipped as data.

The GUIDE's Versioned Defaults block is the machine-readable source; ``assets/contract.json``
is that block as data. A runtime changes a default only through an explicit, reviewed
override, which connect records in the ownership metadata.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from vera.errors import InvalidInput

CONTRACT_VERSION_KEY = "vera_integration_contract"
SAVE_MODES = ("off", "suggest", "auto-propose")
# What each save mode's MCP token may do, and no more: `off` reads only, so the server itself
# refuses every write (proposals, feedback, snapshots, persisted packs) whatever the runtime
# or its permission mode decides; the other modes add exact feedback, persisted packs and
# proposals.
SAVE_MODE_SCOPES: Mapping[str, tuple[str, ...]] = {
    "off": ("memory:read",),
    "suggest": ("memory:read", "memory:snapshot", "memory:feedback", "memory:propose"),
    "auto-propose": ("memory:read", "memory:snapshot", "memory:feedback", "memory:propose"),
}


# Runtimes whose client approves per tool, never per call: they cannot ask for
# knowledge_get_context(persist=true) alone, so their credential cannot persist, and the
# server refuses that call (and snapshots) for them; ephemeral grounding then runs without a
# prompt (docs/adr/0019-reads-without-prompts.md).
PER_TOOL_APPROVAL_RUNTIMES = frozenset({"codex", "opencode"})
PERSIST_SCOPE = "memory:snapshot"


def credential_scopes(runtime: str, mode: str) -> tuple[str, ...]:
    """The scopes of the MCP token ``vera connect`` mints for ``runtime`` in save mode
    ``mode``: each runtime has its own credential, so one runtime's mode never changes
    another's rights."""
    scopes = SAVE_MODE_SCOPES[mode]
    if runtime in PER_TOOL_APPROVAL_RUNTIMES:
        return tuple(scope for scope in scopes if scope != PERSIST_SCOPE)
    return tuple(scopes)


# The defaults a reviewed override may change, and the values each may take. Everything
# else (privacy, approval, shared promotion) is fixed by the GUIDE: an override there would
# break the contract rather than tune it.
OVERRIDABLE: Mapping[str, tuple[str, ...]] = {
    "defaults.save_mode": SAVE_MODES,
    "defaults.tool_profile": ("coding", "advanced", "compatibility"),
    "defaults.legacy_tools": ("disabled", "enabled"),
}


def load_contract() -> dict[str, Any]:
    """The shipped contract block, as a fresh dict the caller may keep."""
    text = resources.files("vera.integrations").joinpath("assets/contract.json").read_text()
    return json.loads(text)


def contract_version(contract: Mapping[str, Any]) -> int:
    return int(contract[CONTRACT_VERSION_KEY])


def save_mode(contract: Mapping[str, Any]) -> str:
    return str(contract["defaults"]["save_mode"])


def apply_overrides(
    contract: Mapping[str, Any], overrides: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Apply reviewed overrides (``"defaults.save_mode": "off"``) to a contract.

    Returns the effective contract and the overrides that actually changed a value, which
    is what the ownership metadata records. An unknown key or value is refused, naming it.
    """
    effective = copy.deepcopy(dict(contract))
    reviewed: dict[str, str] = {}
    for key, value in overrides.items():
        allowed = OVERRIDABLE.get(key)
        if allowed is None:
            raise InvalidInput(key, f"{key} is not an overridable integration default")
        if value not in allowed:
            raise InvalidInput(key, f"{key} must be one of {', '.join(allowed)}")
        section, name = key.split(".", 1)
        if effective[section][name] != value:
            effective[section][name] = value
            reviewed[key] = value
    return effective, reviewed
