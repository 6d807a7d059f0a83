"""Discovery profiles (``VERA_MCP__TOOL_PROFILE``): which tools are visible and served.

coding: the ten coding tools; advanced: all twenty canonical knowledge_* tools;
compatibility: those plus the eight memory_* aliases. Visibility is not permission: a
tool outside the profile is refused exactly like an unknown one, and every visible tool
still passes the guard's class, bounds and quota checks.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping

from vera.gateway.compat_tools import compat_surface
from vera.gateway.handlers import HANDLERS, Handler
from vera.gateway.snapshot_tools import SNAPSHOT_HANDLERS, SNAPSHOT_TOOLS
from vera.gateway.tools import CODING_TOOLS, ToolSpec

log = logging.getLogger(__name__)

PROFILES = ("coding", "advanced", "compatibility")


def _graph_surface() -> tuple[tuple[ToolSpec, ...], Mapping[str, Handler]]:
    """The knowledge-model tools (explore, entities, sources, changes, conflicts,
    communities), served from gateway.graph_tools / gateway.graph_handlers once present."""
    modules = ("vera.gateway.graph_tools", "vera.gateway.graph_handlers")
    if any(importlib.util.find_spec(name) is None for name in modules):
        log.warning("gateway.graph_tools/graph_handlers are not present: graph tools not served")
        return (), {}
    from vera.gateway.graph_handlers import GRAPH_HANDLERS
    from vera.gateway.graph_tools import GRAPH_TOOLS

    return tuple(GRAPH_TOOLS), GRAPH_HANDLERS


def _surface(profile: str) -> tuple[tuple[ToolSpec, ...], dict[str, Handler]]:
    if profile not in PROFILES:
        raise ValueError(f"unknown tool profile {profile!r}")
    tools: tuple[ToolSpec, ...] = CODING_TOOLS
    table: dict[str, Handler] = dict(HANDLERS)
    if profile == "coding":
        return tools, table
    graph_tools, graph_handlers = _graph_surface()
    tools = (*tools, *graph_tools, *SNAPSHOT_TOOLS)
    table.update(graph_handlers)
    table.update(SNAPSHOT_HANDLERS)
    if profile == "compatibility":
        aliases, alias_handlers = compat_surface(graph_tools, graph_handlers)
        tools = (*tools, *aliases)
        table.update(alias_handlers)
    return tools, table


def tools_for_profile(profile: str) -> tuple[ToolSpec, ...]:
    return _surface(profile)[0]


def handlers_for_profile(profile: str) -> dict[str, Handler]:
    """Handlers of the visible tools only, so a hidden tool has no way to run."""
    tools, table = _surface(profile)
    return {spec.name: table[spec.name] for spec in tools}
