"""Tool bodies of the eight legacy ``memory_*`` aliases (compatibility profile only).

Most aliases run their canonical tool's body on the alias arguments re-validated by the
canonical tool's own argument spec (``delegate``), so the canonical defaults and bounds
apply. memory_get_source returns the sources behind one fact, memory_recent_changes
reads the change feed newest first and filtered to published facts, and memory_feedback
keeps the legacy schema, where only an optional context_pack_id gives exact attribution
and client-supplied signals are never used as calibration data. The aliases have no text
rendering of their own: their text is the result's JSON.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from typing import Any

from vera import secret_screen
from vera.gateway import call_context, coding_handlers, graph_handlers
from vera.gateway.call_context import CallContext, Handler
from vera.gateway.spec import ToolSpec
from vera.gateway.views import ts
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2

# The kinds of change memory_recent_changes lists: newly published facts and corrections.
PUBLISHED_CHANGES = ("published", "correction")


def delegate(
    canonical: ToolSpec, body: Handler | None = None, fixed: Mapping[str, Any] = {}
) -> Handler:
    """Runs ``body`` (the canonical tool's own by default) with the alias arguments
    re-validated by the canonical spec, ``fixed`` ones added."""
    run_body = body or canonical.handler

    async def run(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
        given = {k: v for k, v in args.items() if v is not None}
        for name, value in given.items():
            # Bounds already checked timestamps into datetimes; the canonical spec wants text.
            if hasattr(value, "isoformat"):
                given[name] = value.isoformat()
        return await run_body(ctx, canonical.arguments.validate({**given, **fixed}))

    return run


recent_changes = functools.partial(
    graph_handlers.get_changes, newest_first=True, changes=PUBLISHED_CHANGES
)


async def get_source(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    explained = await coding_handlers.explain_fact(ctx, args)
    sources: dict[str, dict[str, Any]] = {}
    for a in (*explained["supporting"], *explained["refuting"]):
        if a["source"] is not None:
            sources.setdefault(a["source"]["source_id"], a["source"])
    return {"fact": explained["fact"], "sources": list(sources.values())}


async def feedback(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    if args.get("context_pack_id") is not None:
        # Exact attribution: the pack supplies the query, rank and signal vector.
        exact = {k: args[k] for k in ("context_pack_id", "result_ref", "signal")}
        return await coding_handlers.feedback(ctx, exact)
    # No pack: no stable attribution key, so every call records a new row (not idempotent),
    # and the client's signals are not calibration data: none is stored. The query is
    # stored, so it passes the same secret screen as a proposal.
    query = args.get("query") or ""
    await secret_screen.screen_off_loop((("query", query),))
    scopes = await call_context.scopes(ctx)
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
            attribution=knowledge_pb2.FEEDBACK_ATTRIBUTION_UNATTRIBUTED,
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
