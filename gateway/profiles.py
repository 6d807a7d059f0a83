"""Discovery profiles (``VERA_MCP__TOOL_PROFILE``): which tools are visible and served.

coding: the ten coding tools; advanced: all twenty canonical knowledge_* tools;
compatibility: those plus the eight memory_* aliases. Visibility is not permission: a
tool outside the profile is refused exactly like an unknown one, and every visible tool
still passes the guard's class, bounds and quota checks.
"""

from __future__ import annotations

from vera.gateway.call_context import Handler
from vera.gateway.coding_tools import CODING_TOOLS
from vera.gateway.compat_tools import COMPAT_TOOLS
from vera.gateway.graph_tools import GRAPH_TOOLS
from vera.gateway.snapshot_tools import SNAPSHOT_TOOLS
from vera.gateway.spec import ToolSpec

PROFILES = ("coding", "advanced", "compatibility")

_ADVANCED = (*CODING_TOOLS, *GRAPH_TOOLS, *SNAPSHOT_TOOLS)
_SURFACES: dict[str, tuple[ToolSpec, ...]] = {
    "coding": CODING_TOOLS,
    "advanced": _ADVANCED,
    "compatibility": (*_ADVANCED, *COMPAT_TOOLS),
}


def tools_for_profile(profile: str) -> tuple[ToolSpec, ...]:
    if profile not in PROFILES:
        raise ValueError(f"unknown tool profile {profile!r}")
    return _SURFACES[profile]


def handlers_for_profile(profile: str) -> dict[str, Handler]:
    """Handlers of the visible tools only, so a hidden tool has no way to run."""
    return {spec.name: spec.handler for spec in tools_for_profile(profile)}
