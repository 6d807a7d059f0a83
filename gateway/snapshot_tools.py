"""Snapshot tools (advanced profile) and snapshot-bound replay for get_context and search.

A snapshot pins one project scope, a valid-time boundary (``as_of``), a system-time
boundary (its creation time) and the retrieval contract version. Replaying a query
against it passes those boundaries to retrieval, which keeps every fact version with its
transaction interval, so later writes cannot change the answer. A replay served by a
different retrieval contract fails closed with ``unsupported_version`` instead of
returning a different result. A foreign snapshot reads exactly like a missing one.
"""

from __future__ import annotations

from typing import Any

from vera.gateway import schemas
from vera.gateway.bounds import ArgumentSpec, string, timestamp
from vera.gateway.handlers import CallContext, Handler, _resolve_project
from vera.gateway.snapshot_replay import pinned_snapshot, served_version
from vera.gateway.tools import AuthClass, Hints, ToolSpec
from vera.gateway.views import ts
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.limits import ID_LIKE
from vera.rpc.timestamps import to_timestamp
from vera.snapshot.v1 import snapshot_pb2

SNAPSHOT = schemas.obj(
    {
        "snapshot_id": schemas.STR,
        "project": schemas.PROJECT_REF,
        "as_of": schemas.TS,
        "known_as_of": schemas.TS,
        "created_at": schemas.TS,
        "fact_count": schemas.INT,
        "versions": schemas.obj(
            {
                "assembler": schemas.STR,
                "ontology": schemas.OPT_STR,
                "policy": schemas.STR,
                "embedding": schemas.OPT_STR,
                "index": schemas.OPT_STR,
            }
        ),
        "source_boundaries": schemas.obj(
            {
                "source_count": schemas.INT,
                "oldest_observed_at": schemas.TS,
                "newest_observed_at": schemas.TS,
                "change_position": schemas.INT,
            }
        ),
    }
)


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
    project = await _resolve_project(ctx, args.get("project"))
    version = await served_version(ctx, project.project_id)
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
    project = await _resolve_project(ctx, snapshot.scope_id)
    return _view(snapshot, project)


_PROJECT = string(
    "project",
    ID_LIKE,
    "A project id or slug. Omit to use the single shared project; several readable "
    "projects then fail with ambiguous_project.",
)

SNAPSHOT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="knowledge_get_snapshot",
        title="Get a snapshot",
        description=(
            "A snapshot's metadata: its project, valid-time and system-time boundaries, fact "
            "count, source boundaries and the pinned ontology, policy, embedding and index "
            "versions. A missing or foreign snapshot fails with invalid_input (snapshot_id)."
        ),
        arguments=ArgumentSpec(
            (string("snapshot_id", ID_LIKE, "The snapshot id.", required=True),)
        ),
        output_schema=SNAPSHOT,
        hints=Hints(read_only=True, idempotent=True),
        auth_class=AuthClass.READ,
        bucket="read",
        cost="low",
    ),
    ToolSpec(
        name="knowledge_create_snapshot",
        title="Create a snapshot",
        description=(
            "Freeze an immutable snapshot of the active facts of one resolved project, so a "
            "workflow can reproduce knowledge_get_context or knowledge_search later with "
            "snapshot_id. A deliberate, explicit workflow write: never part of automatic "
            "saving. Not idempotent; send an idempotency key to retry safely."
        ),
        arguments=ArgumentSpec(
            (
                _PROJECT,
                timestamp(
                    "as_of", "Valid-time boundary (ISO-8601); defaults to the creation time."
                ),
            )
        ),
        output_schema=SNAPSHOT,
        hints=Hints(read_only=False, idempotent=False),
        auth_class=AuthClass.SNAPSHOT,
        bucket="snapshot",
        cost="high",
        accepts_idempotency_key=True,
    ),
)

SNAPSHOT_HANDLERS: dict[str, Handler] = {
    "knowledge_get_snapshot": get_snapshot,
    "knowledge_create_snapshot": create_snapshot,
}
