"""The eight legacy ``memory_*`` aliases (compatibility profile only), built from the
canonical tools they stand for.

An alias takes its canonical tool's spec (annotations, class, bucket, cost, output) and
its argument declarations (bounds), with the alias's own name and wording; only where
the seed says an alias differs does it differ: memory_get_context and memory_explain are
searches with limit 5 and 3, memory_get_source returns the sources behind one fact,
memory_recent_changes lists the most recently published facts newest first (the
canonical feed is every change, oldest first), and memory_feedback keeps the legacy
result_ref / signal / query / signals schema. Bodies are in ``compat_handlers``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vera.gateway import compat_handlers, schemas
from vera.gateway.bounds import ArgumentSpec, Param, predicate_list
from vera.gateway.call_context import Handler
from vera.gateway.coding_tools import CODING_TOOLS, TASK_CONTEXT_NAMES
from vera.gateway.graph_tools import GRAPH_TOOLS
from vera.gateway.spec import Hints, ToolSpec

_CANONICAL = {spec.name: spec for spec in (*CODING_TOOLS, *GRAPH_TOOLS)}
_SEARCH = _CANONICAL["knowledge_search"]
_EXPLAIN_FACT = _CANONICAL["knowledge_explain_fact"]
_EXPLORE = _CANONICAL["knowledge_explore"]
_CHANGES = _CANONICAL["knowledge_get_changes"]
_PROPOSE = _CANONICAL["knowledge_propose"]
_FEEDBACK = _CANONICAL["knowledge_feedback"]


def _argument(canonical: ToolSpec, name: str, **changes: Any) -> Param:
    """The canonical tool's declaration of ``name`` (its bounds), with the alias's wording
    or requiredness where the alias differs."""
    param = next(p for p in canonical.arguments.params if p.name == name)
    return dataclasses.replace(param, **changes)


def _alias(
    canonical: ToolSpec,
    name: str,
    title: str,
    description: str,
    params: tuple[Param, ...],
    handler: Handler,
    **differences: Any,
) -> ToolSpec:
    return dataclasses.replace(
        canonical,
        name=name,
        title=title,
        description=description,
        arguments=ArgumentSpec(params),
        handler=handler,
        renderer=None,  # an alias's text is its result's JSON
        **differences,
    )


_SEARCH_ARGUMENTS = (
    _argument(_SEARCH, "query", description="The question, in plain words."),
    _argument(_SEARCH, "project", description="A project id or slug; omit to search every scope."),
    _argument(_SEARCH, "as_of", description="Valid-time boundary (ISO-8601)."),
)

SOURCES = schemas.obj({"fact": schemas.FACT, "sources": schemas.array(schemas.SOURCE)})
LEGACY_FEEDBACK = {
    **schemas.FEEDBACK,
    "properties": {
        **schemas.FEEDBACK["properties"],
        "context_pack_id": schemas.OPT_STR,
        "level": {"type": "string", "enum": ["result", "pack", "legacy"]},
    },
}

COMPAT_TOOLS: tuple[ToolSpec, ...] = (
    _alias(
        _SEARCH,
        "memory_search",
        "Search memory (legacy)",
        "Legacy alias of knowledge_search: ranked verified facts with provenance.",
        (*_SEARCH_ARGUMENTS, _argument(_SEARCH, "limit")),
        compat_handlers.delegate(_SEARCH),
    ),
    _alias(
        _SEARCH,
        "memory_get_context",
        "Get memory context (legacy)",
        "Legacy alias: the most relevant facts as context (a search with limit 5). "
        "Prefer knowledge_get_context, which adds citations, filters and persistence.",
        _SEARCH_ARGUMENTS,
        compat_handlers.delegate(_SEARCH, fixed={"limit": 5}),
    ),
    _alias(
        _EXPLORE,
        "memory_explore",
        "Explore memory (legacy)",
        "Legacy alias of knowledge_explore: facts within N hops of an entity.",
        (
            _argument(_EXPLORE, "entity", description="The entity name or id.", required=True),
            _argument(_EXPLORE, "depth", description="Hops (1..5)."),
            _argument(_EXPLORE, "limit"),
        ),
        compat_handlers.delegate(_EXPLORE),
    ),
    _alias(
        _SEARCH,
        "memory_explain",
        "Explain from memory (legacy)",
        "Legacy alias: the top matches for a query with source and verification (a "
        "search with limit 3). Prefer knowledge_explain_fact.",
        _SEARCH_ARGUMENTS,
        compat_handlers.delegate(_SEARCH, fixed={"limit": 3}),
    ),
    _alias(
        _EXPLAIN_FACT,
        "memory_get_source",
        "Get a fact's sources (legacy)",
        "Legacy alias: the provenance (sources) of one published fact.",
        (_argument(_EXPLAIN_FACT, "fact_key", description="The fact's key."),),
        compat_handlers.delegate(_EXPLAIN_FACT, compat_handlers.get_source),
        output_schema=SOURCES,
    ),
    _alias(
        _CHANGES,
        "memory_recent_changes",
        "Recent changes (legacy)",
        "Legacy alias of knowledge_get_changes: the most recently published facts "
        "(corrections included, proposals not), newest first.",
        (_argument(_CHANGES, "limit"), _argument(_CHANGES, "cursor")),
        compat_handlers.delegate(_CHANGES, compat_handlers.recent_changes),
    ),
    _alias(
        _PROPOSE,
        "memory_propose",
        "Propose a memory (legacy)",
        "Legacy alias of knowledge_propose: a PROPOSED fact in the caller's personal "
        "scope for a human to verify; never shared truth.",
        (
            _argument(_PROPOSE, "subject"),
            _argument(_PROPOSE, "predicate", description="Predicate."),
            _argument(_PROPOSE, "object", description="Object."),
            _argument(_PROPOSE, "evidence_text"),
            *(_argument(_PROPOSE, name) for name in (*TASK_CONTEXT_NAMES, "project")),
        ),
        compat_handlers.delegate(_PROPOSE),
    ),
    _alias(
        _FEEDBACK,
        "memory_feedback",
        "Feedback (legacy)",
        "Legacy feedback schema. Pass context_pack_id for exact attribution (the pack "
        "supplies query, rank and signals); without it the call is not idempotent and "
        "client-supplied query/signals are never used as calibration data.",
        (
            _argument(_FEEDBACK, "result_ref", description="The rated result."),
            _argument(_FEEDBACK, "signal"),
            _argument(
                _SEARCH,
                "query",
                description="The legacy query text (not calibration data).",
                required=False,
            ),
            # Legacy only: no canonical tool takes client signals.
            predicate_list("signals", "Legacy client signals (not calibration data)."),
            _argument(
                _FEEDBACK,
                "context_pack_id",
                description="A persisted pack, for exact attribution.",
                required=False,
            ),
        ),
        compat_handlers.feedback,
        output_schema=LEGACY_FEEDBACK,
        hints=Hints(read_only=False, idempotent=False),
    ),
)
