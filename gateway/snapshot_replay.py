"""Snapshot-bound replay for knowledge_get_context and knowledge_search.

The snapshot pins one project scope, the valid-time boundary and the system-time boundary
(its creation time); retrieval keeps every fact version with its transaction interval, so
passing those boundaries reproduces the result after later writes. A replay served by a
different retrieval contract version fails closed with ``unsupported_version``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vera.errors import InvalidInput, NotFound, UnsupportedVersion
from vera.gateway.bounds import BoundsError
from vera.identity.v1 import identity_pb2
from vera.retrieval.v1 import retrieval_pb2
from vera.snapshot.v1 import snapshot_pb2

if TYPE_CHECKING:
    from vera.gateway.handlers import CallContext

# Retrieval reports its contract version only with an assembled context; the cheapest
# assembly (one result, the minimum budget) tells which contract serves the scope.
_PROBE_QUERY = "snapshot contract version"
_PROBE_TOKEN_BUDGET = 100


async def _resolve(ctx: CallContext, project: str) -> identity_pb2.Project:
    response = await ctx.backends.identity.ResolveProject(
        identity_pb2.ResolveProjectRequest(principal_id=ctx.caller.principal_id, project=project)
    )
    return response.project


def snapshot_excludes_time_bounds(arguments: Mapping[str, Any]) -> None:
    """A snapshot fixes both time boundaries; a second, different one would be ambiguous."""
    if arguments.get("snapshot_id") is None:
        return
    for name in ("as_of", "known_as_of"):
        if arguments.get(name) is not None:
            raise BoundsError(name, "conflicts_with_snapshot")


async def pinned_snapshot(ctx: CallContext, snapshot_id: str) -> snapshot_pb2.Snapshot:
    try:
        response = await ctx.backends.snapshot.GetSnapshot(
            snapshot_pb2.GetSnapshotRequest(
                principal_id=ctx.caller.principal_id, snapshot_id=snapshot_id
            )
        )
    except NotFound:
        # Missing and foreign snapshots read the same.
        raise InvalidInput("snapshot_id", reason="not_found") from None
    return response.snapshot


def pin_filters(filters: retrieval_pb2.RetrievalFilters, snapshot: snapshot_pb2.Snapshot) -> None:
    filters.as_of.CopyFrom(snapshot.as_of)
    filters.known_as_of.CopyFrom(snapshot.known_as_of)


def require_version(snapshot: snapshot_pb2.Snapshot, served: str) -> None:
    if served != snapshot.assembler_version:
        raise UnsupportedVersion()


async def snapshot_project(
    ctx: CallContext, snapshot: snapshot_pb2.Snapshot, project: str | None
) -> identity_pb2.Project:
    """The snapshot's project, re-resolved so a caller who lost access cannot replay it."""
    pinned = await _resolve(ctx, snapshot.scope_id)
    if project is not None:
        named = await _resolve(ctx, project)
        if named.project_id != pinned.project_id:
            raise InvalidInput("project", reason="snapshot_scope_mismatch")
    return pinned


async def served_version(ctx: CallContext, scope_id: str) -> str:
    probe = await ctx.backends.retrieval.AssembleContext(
        retrieval_pb2.AssembleContextRequest(
            scope_id=scope_id,
            query=_PROBE_QUERY,
            limit=1,
            token_budget=_PROBE_TOKEN_BUDGET,
            compact_citations=True,
        )
    )
    return probe.assembler_version
