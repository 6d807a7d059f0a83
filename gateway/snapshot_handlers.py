"""Tool bodies of the snapshot tools: create a snapshot of one resolved project and read
one back. Replaying get_context or search against a snapshot is the coding tools' own
body, pinned by ``call_context.pin_to_snapshot``.

A snapshot pins one project scope, a valid-time boundary (``as_of``), a system-time
boundary (its creation time) and the retrieval contract version. A foreign snapshot reads
exactly like a missing one. The snapshot tools have no text rendering of their own: their
text is the result's JSON.
"""

from __future__ import annotations

from typing import Any

from vera.gateway.call_context import CallContext, pinned_snapshot, resolve_project
from vera.gateway.views import ts
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.timestamps import to_timestamp
from vera.snapshot.v1 import snapshot_pb2


async def _served_version(ctx: CallContext, scope_id: str) -> str:
    """The contract the project is served with (its ranking model included)."""
    status = await ctx.backends.retrieval.GetIndexStatus(
        retrieval_pb2.GetIndexStatusRequest(scope_id=scope_id)
    )
    return status.assembler_version


def _view(snapshot: snapshot_pb2.Snapshot, project: Any) -> dict[str, Any]:
    return {
        "snapshot_id": snapshot.snapshot_id,
        "project": {"project_id": project.project_id, "slug": project.slug},
        "as_of": ts(snapshot, "as_of"),
        "known_as_of": ts(snapshot, "known_as_of"),
        "created_at": ts(snapshot, "created_at"),
        "fact_count": snapshot.fact_count,
        "versions": {
            "assembler": snapshot.assembler_version,
            "ontology": snapshot.ontology_version or None,
            "policy": snapshot.policy_version,
            "embedding": snapshot.embedding_version or None,
            "index": snapshot.index_version or None,
        },
        "source_boundaries": {
            "source_count": snapshot.source_count,
            "oldest_observed_at": ts(snapshot, "oldest_source_observed_at"),
            "newest_observed_at": ts(snapshot, "newest_source_observed_at"),
            "change_position": snapshot.change_position,
        },
    }


async def create_snapshot(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    project = await resolve_project(ctx, args.get("project"))
    version = await _served_version(ctx, project.project_id)
    # Knowledge reports the ontology version that decides single-valued predicates with
    # its conflict listing; one row is the cheapest way to read it.
    conflicts = await ctx.backends.knowledge.ListConflicts(
        knowledge_pb2.ListConflictsRequest(scope_ids=[project.project_id], page_size=1)
    )
    request = snapshot_pb2.CreateSnapshotRequest(
        principal_id=ctx.caller.principal_id,
        scope_id=project.project_id,
        assembler_version=version,
        ontology_version=conflicts.ontology_version,
    )
    if args.get("as_of") is not None:
        request.as_of.CopyFrom(to_timestamp(args["as_of"]))
    created = await ctx.backends.snapshot.CreateSnapshot(request)
    return _view(created.snapshot, project)


async def get_snapshot(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    snapshot = await pinned_snapshot(ctx, args["snapshot_id"])
    project = await resolve_project(ctx, snapshot.scope_id)
    return _view(snapshot, project)
