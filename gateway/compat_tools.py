"""The eight legacy ``memory_*`` aliases (compatibility profile only).

Each is a thin wrapper: its arguments are re-validated by the canonical tool's own
argument spec (so the canonical defaults and bounds apply) and the canonical handler runs.
The aliases differ only where the seed says they do: memory_get_context and
memory_explain are searches with limit 5 and 3, memory_get_source returns the sources
behind one fact, memory_recent_changes lists the most recently published facts newest
first (the canonical feed is every change, oldest first), and memory_feedback keeps the
legacy result_ref / signal / query / signals schema, where only an optional
context_pack_id gives exact attribution and client-supplied signals are never used as
calibration data.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from typing import Any

from vera import secret_screen
from vera.gateway import handlers, schemas
from vera.gateway.bounds import (
    ArgumentSpec,
    Param,
    enum,
    integer,
    predicate_list,
    string,
    timestamp,
)
from vera.gateway.handlers import CallContext, Handler
from vera.gateway.tools import CODING_TOOLS, READ_HINTS, AuthClass, Hints, ToolSpec
from vera.gateway.views import ts
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.limits import (
    DEPTH,
    ENTITY,
    EVIDENCE_TEXT,
    ID_LIKE,
    LIMIT,
    LIMIT_FEED,
    PREDICATE_OBJECT,
    QUERY,
    REPOSITORY_PATH_CURSOR,
    SUBJECT,
)

# The kinds of change memory_recent_changes lists: newly published facts and corrections.
PUBLISHED_CHANGES = ("published", "correction")
_CODING = {spec.name: spec for spec in CODING_TOOLS}
_TASK_FIELDS = tuple(
    p
    for p in _CODING["knowledge_propose"].arguments.params
    if p.name not in ("subject", "predicate", "object", "evidence_text")
)

_QUERY = string("query", QUERY, "The question, in plain words.", required=True)
_PROJECT = string("project", ID_LIKE, "A project id or slug; omit to search every scope.")
_AS_OF = timestamp("as_of", "Valid-time boundary (ISO-8601).")


def _delegate(canonical: ToolSpec, handler: Handler, fixed: Mapping[str, Any] = {}) -> Handler:
    """Runs ``handler`` with the alias arguments re-validated by the canonical spec."""

    async def run(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
        given = {k: v for k, v in args.items() if v is not None}
        for name, value in given.items():
            # Bounds already checked timestamps into datetimes; the canonical spec wants text.
            if hasattr(value, "isoformat"):
                given[name] = value.isoformat()
        return await handler(ctx, canonical.arguments.validate({**given, **fixed}))

    return run


async def _get_source(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    explained = await handlers.explain_fact(ctx, args)
    sources: dict[str, dict[str, Any]] = {}
    for a in (*explained["supporting"], *explained["refuting"]):
        if a["source"] is not None:
            sources.setdefault(a["source"]["source_id"], a["source"])
    return {"fact": explained["fact"], "sources": list(sources.values())}


async def _feedback(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    if args.get("context_pack_id") is not None:
        # Exact attribution: the pack supplies the query, rank and signal vector.
        exact = {k: args[k] for k in ("context_pack_id", "result_ref", "signal")}
        return await handlers.feedback(ctx, exact)
    # No pack: no stable attribution key, so every call records a new row (not idempotent),
    # and the client's signals are not calibration data: none is stored. The query is
    # stored, so it passes the same secret screen as a proposal.
    query = args.get("query") or ""
    secret_screen.screen((("query", query),))
    scopes = await handlers._scopes(ctx)
    legacy_ref = f"legacy:{uuid.uuid4()}"
    recorded = await ctx.backends.knowledge.RecordFeedback(
        knowledge_pb2.RecordFeedbackRequest(
            principal_id=ctx.caller.principal_id,
            personal_scope_id=scopes.personal_scope_id,
            pack_id=legacy_ref,
            result_ref=args["result_ref"],
            signal=args["signal"],
            query=query,
            rank=0,
        )
    )
    return {
        "feedback_id": recorded.feedback_id,
        "context_pack_id": None,
        "result_ref": args["result_ref"],
        "signal": recorded.signal,
        "created": recorded.created,
        "recorded_at": ts(recorded, "recorded_at"),
        "level": "legacy",
    }


SOURCES = schemas.obj({"fact": schemas.FACT, "sources": schemas.array(schemas.SOURCE)})
LEGACY_FEEDBACK = {
    **schemas.FEEDBACK,
    "properties": {
        **schemas.FEEDBACK["properties"],
        "context_pack_id": schemas.OPT_STR,
        "level": {"type": "string", "enum": ["result", "pack", "legacy"]},
    },
}


def _search_alias(name: str, title: str, description: str, limit: int | None) -> ToolSpec:
    params: tuple[Param, ...] = (_QUERY, _PROJECT, _AS_OF)
    if limit is None:
        params += (integer("limit", LIMIT, "Maximum results (1..50).", 10),)
    return ToolSpec(
        name=name,
        title=title,
        description=description,
        arguments=ArgumentSpec(params),
        output_schema=schemas.SEARCH,
        hints=READ_HINTS,
        auth_class=AuthClass.READ,
        bucket="read",
        cost="medium",
    )


def compat_surface(
    graph_tools: tuple[ToolSpec, ...], graph_handlers: Mapping[str, Handler]
) -> tuple[tuple[ToolSpec, ...], dict[str, Handler]]:
    """The memory_* aliases whose canonical tools are served, with their handlers."""
    search = _CODING["knowledge_search"]
    tools: list[ToolSpec] = [
        _search_alias(
            "memory_search",
            "Search memory (legacy)",
            "Legacy alias of knowledge_search: ranked verified facts with provenance.",
            None,
        ),
        _search_alias(
            "memory_get_context",
            "Get memory context (legacy)",
            "Legacy alias: the most relevant facts as context (a search with limit 5). "
            "Prefer knowledge_get_context, which adds citations, filters and persistence.",
            5,
        ),
    ]
    table: dict[str, Handler] = {
        "memory_search": _delegate(search, handlers.search),
        "memory_get_context": _delegate(search, handlers.search, {"limit": 5}),
    }
    graph = {spec.name: spec for spec in graph_tools}
    explore = graph.get("knowledge_explore")
    if explore is not None and "knowledge_explore" in graph_handlers:
        tools.append(
            ToolSpec(
                name="memory_explore",
                title="Explore memory (legacy)",
                description="Legacy alias of knowledge_explore: facts within N hops of an entity.",
                arguments=ArgumentSpec(
                    (
                        string("entity", ENTITY, "The entity name or id.", required=True),
                        integer("depth", DEPTH, "Hops (1..5).", 2),
                        integer("limit", LIMIT_FEED, "Maximum edges (1..200).", 50),
                    )
                ),
                output_schema=explore.output_schema,
                hints=READ_HINTS,
                auth_class=AuthClass.READ,
                bucket="read",
                cost="low",
            )
        )
        table["memory_explore"] = _delegate(explore, graph_handlers["knowledge_explore"])
    tools.append(
        _search_alias(
            "memory_explain",
            "Explain from memory (legacy)",
            "Legacy alias: the top matches for a query with source and verification (a "
            "search with limit 3). Prefer knowledge_explain_fact.",
            3,
        )
    )
    table["memory_explain"] = _delegate(search, handlers.search, {"limit": 3})
    tools.append(
        ToolSpec(
            name="memory_get_source",
            title="Get a fact's sources (legacy)",
            description="Legacy alias: the provenance (sources) of one published fact.",
            arguments=ArgumentSpec(
                (string("fact_key", ID_LIKE, "The fact's key.", required=True),)
            ),
            output_schema=SOURCES,
            hints=READ_HINTS,
            auth_class=AuthClass.READ,
            bucket="read",
            cost="low",
        )
    )
    table["memory_get_source"] = _delegate(_CODING["knowledge_explain_fact"], _get_source)
    changes = graph.get("knowledge_get_changes")
    if changes is not None and "knowledge_get_changes" in graph_handlers:
        tools.append(
            ToolSpec(
                name="memory_recent_changes",
                title="Recent changes (legacy)",
                description=(
                    "Legacy alias of knowledge_get_changes: the most recently published facts "
                    "(corrections included, proposals not), newest first."
                ),
                arguments=ArgumentSpec(
                    (
                        integer("limit", LIMIT_FEED, "Maximum changes (1..200).", 50),
                        string(
                            "cursor", REPOSITORY_PATH_CURSOR, "next_cursor from the previous page."
                        ),
                    )
                ),
                output_schema=changes.output_schema,
                hints=READ_HINTS,
                auth_class=AuthClass.READ,
                bucket="read",
                cost="low",
            )
        )
        recent = functools.partial(
            graph_handlers["knowledge_get_changes"],
            newest_first=True,
            changes=PUBLISHED_CHANGES,
        )
        table["memory_recent_changes"] = _delegate(changes, recent)
    propose = _CODING["knowledge_propose"]
    tools.append(
        ToolSpec(
            name="memory_propose",
            title="Propose a memory (legacy)",
            description=(
                "Legacy alias of knowledge_propose: a PROPOSED fact in the caller's personal "
                "scope for a human to verify; never shared truth."
            ),
            arguments=ArgumentSpec(
                (
                    string("subject", SUBJECT, "Subject of the fact.", required=True),
                    string("predicate", PREDICATE_OBJECT, "Predicate.", required=True),
                    string("object", PREDICATE_OBJECT, "Object.", required=True),
                    string("evidence_text", EVIDENCE_TEXT, "Optional bounded evidence."),
                    *_TASK_FIELDS,
                )
            ),
            output_schema=propose.output_schema,
            hints=Hints(read_only=False, idempotent=False),
            auth_class=AuthClass.PROPOSE,
            bucket="propose",
            cost="low",
            accepts_idempotency_key=True,
            replay_reaches_service=True,
        )
    )
    table["memory_propose"] = _delegate(propose, handlers.propose)
    tools.append(
        ToolSpec(
            name="memory_feedback",
            title="Feedback (legacy)",
            description=(
                "Legacy feedback schema. Pass context_pack_id for exact attribution (the pack "
                "supplies query, rank and signals); without it the call is not idempotent and "
                "client-supplied query/signals are never used as calibration data."
            ),
            arguments=ArgumentSpec(
                (
                    string("result_ref", ID_LIKE, "The rated result.", required=True),
                    enum("signal", ("up", "down"), "up or down.", required=True),
                    string("query", QUERY, "The legacy query text (not calibration data)."),
                    predicate_list("signals", "Legacy client signals (not calibration data)."),
                    string("context_pack_id", ID_LIKE, "A persisted pack, for exact attribution."),
                )
            ),
            output_schema=LEGACY_FEEDBACK,
            hints=Hints(read_only=False, idempotent=False),
            auth_class=AuthClass.FEEDBACK,
            bucket="feedback",
            cost="low",
            accepts_idempotency_key=True,
        )
    )
    table["memory_feedback"] = _feedback
    return tuple(tools), table
