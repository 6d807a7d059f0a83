"""What every tool body is handed (``CallContext``) and the lookups they share: the
caller's scopes, project resolution, retrieval filters and the snapshot pin.

No business rules live here: each lookup is one gRPC call to identity (or snapshot), or a
translation of bounds-checked arguments into a request message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message

from vera.config import Settings
from vera.errors import InvalidInput, NotFound, UnsupportedVersion
from vera.gateway.auth import Caller
from vera.gateway.project_cache import ProjectCache
from vera.identity.v1 import identity_pb2
from vera.repository_identity import canonicalize, relative_code_path
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends
from vera.rpc.timestamps import to_timestamp
from vera.snapshot.v1 import snapshot_pb2


@dataclass(frozen=True)
class CallContext:
    caller: Caller
    backends: Backends
    settings: Settings
    protocol_version: str | None
    visible_tools: tuple[str, ...]
    projects: ProjectCache | None = None


Handler = Callable[[CallContext, dict[str, Any]], Awaitable[dict[str, Any]]]


async def scopes(ctx: CallContext) -> identity_pb2.ResolveScopesResponse:
    return await ctx.backends.identity.ResolveScopes(
        identity_pb2.ResolveScopesRequest(principal_id=ctx.caller.principal_id)
    )


async def _load_project(ctx: CallContext, project: str | None) -> identity_pb2.Project:
    response = await ctx.backends.identity.ResolveProject(
        identity_pb2.ResolveProjectRequest(
            principal_id=ctx.caller.principal_id, project=project or ""
        )
    )
    return response.project


async def resolve_project(ctx: CallContext, project: str | None) -> identity_pb2.Project:
    if ctx.projects is None:
        return await _load_project(ctx, project)
    return await ctx.projects.resolve(
        ctx.caller.principal_id, project or "", lambda: _load_project(ctx, project)
    )


async def scope_ids(ctx: CallContext, project: str | None) -> list[str]:
    """The named project's scope, or every scope the caller reads."""
    if project is not None:
        return [(await resolve_project(ctx, project)).project_id]
    return [p.project_id for p in (await scopes(ctx)).projects]


_Request = TypeVar("_Request", bound=Message)


def with_time_bounds(request: _Request, args: dict[str, Any]) -> _Request:
    """``request`` with the ``as_of`` / ``known_as_of`` arguments given set on it."""
    for name in ("as_of", "known_as_of"):
        if args.get(name) is not None:
            getattr(request, name).CopyFrom(to_timestamp(args[name]))
    return request


_CONFLICT_HANDLING = {
    "include": retrieval_pb2.CONFLICT_HANDLING_INCLUDE,
    "exclude": retrieval_pb2.CONFLICT_HANDLING_EXCLUDE,
    "only": retrieval_pb2.CONFLICT_HANDLING_ONLY,
}


def binding_hints(args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with the repository and code-path hints as identities, never raw text.

    A remote becomes its canonical ``host/path`` (credentials, query and ``.git`` gone), as
    facts store it, so ``git@github.com:acme/x.git`` binds like ``github.com/acme/x``; a
    code path becomes repository-relative. A hint that names no remote, or a local path,
    is dropped: it could bind nothing, and must never reach a persisted pack.
    """
    hints = dict(args)
    if hints.get("repository") is not None:
        hints["repository"] = canonicalize(hints["repository"])
    if hints.get("code_path") is not None:
        hints["code_path"] = relative_code_path(hints["code_path"])
    return hints


def filters(args: dict[str, Any]) -> retrieval_pb2.RetrievalFilters:
    out = retrieval_pb2.RetrievalFilters(
        repository=args.get("repository") or "",
        branch=args.get("branch") or "",
        code_path=args.get("code_path") or "",
        document_type=args.get("document_type") or "",
        source_type=args.get("source_type") or "",
        include_predicates=args.get("include_predicates") or [],
        exclude_predicates=args.get("exclude_predicates") or [],
        conflict_handling=_CONFLICT_HANDLING[args.get("conflict_handling") or "include"],
    )
    with_time_bounds(out, args)
    if args.get("min_authority") is not None:
        out.min_authority = args["min_authority"]
    if args.get("max_trust_tier") is not None:
        out.max_trust_tier = args["max_trust_tier"]
    return out


# The snapshot pin --------------------------------------------------------------------------
# A snapshot pins one project scope, the valid-time boundary and the system-time boundary
# (its creation time); retrieval keeps every fact version with its transaction interval, so
# passing those boundaries reproduces the result after later writes. Retrieval orders a
# replay under the snapshot's contract version (the learned ranking model it was taken
# with, or none); a replay served by a different one fails closed with
# ``unsupported_version``.


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


async def pin_to_snapshot(
    ctx: CallContext,
    snapshot_id: str,
    project: str | None,
    filters: retrieval_pb2.RetrievalFilters,
) -> tuple[snapshot_pb2.Snapshot, identity_pb2.Project]:
    """The snapshot and its project, with its time boundaries set on ``filters``.

    The project is re-resolved (never from the cache) so a caller who lost access cannot
    replay it; a ``project`` argument must name that same project.
    """
    snapshot = await pinned_snapshot(ctx, snapshot_id)
    pinned = await _load_project(ctx, snapshot.scope_id)
    if project is not None:
        named = await _load_project(ctx, project)
        if named.project_id != pinned.project_id:
            raise InvalidInput("project", reason="snapshot_scope_mismatch")
    filters.as_of.CopyFrom(snapshot.as_of)
    filters.known_as_of.CopyFrom(snapshot.known_as_of)
    return snapshot, pinned


def require_version(snapshot: snapshot_pb2.Snapshot, served: str) -> None:
    if served != snapshot.assembler_version:
        raise UnsupportedVersion()
