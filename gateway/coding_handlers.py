"""Tool bodies: each is a translation to one or a few gRPC calls and back to JSON.

No business rules live here. Arguments arrive already bounds-checked with defaults
filled (timestamps as aware datetimes); failures are ``VeraError`` from the services,
which the guard maps to the MCP error contract.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from vera import INTEGRATION_CONTRACT_VERSION, SERVER_VERSION
from vera.config import Settings
from vera.errors import InvalidInput, NotFound
from vera.gateway import snapshot_replay, views
from vera.gateway.auth import Caller, scope_names
from vera.gateway.project_cache import ProjectCache
from vera.gateway.tools import TASK_CONTEXT_NAMES, AuthClass
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
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


# Shared lookups ----------------------------------------------------------------------------


async def _scopes(ctx: CallContext) -> identity_pb2.ResolveScopesResponse:
    return await ctx.backends.identity.ResolveScopes(
        identity_pb2.ResolveScopesRequest(principal_id=ctx.caller.principal_id)
    )


async def _resolve_project(ctx: CallContext, project: str | None) -> identity_pb2.Project:
    async def load() -> identity_pb2.Project:
        response = await ctx.backends.identity.ResolveProject(
            identity_pb2.ResolveProjectRequest(
                principal_id=ctx.caller.principal_id, project=project or ""
            )
        )
        return response.project

    if ctx.projects is None:
        return await load()
    return await ctx.projects.resolve(ctx.caller.principal_id, project or "", load)


_CONFLICT_HANDLING = {
    "include": retrieval_pb2.CONFLICT_HANDLING_INCLUDE,
    "exclude": retrieval_pb2.CONFLICT_HANDLING_EXCLUDE,
    "only": retrieval_pb2.CONFLICT_HANDLING_ONLY,
}


def _binding_hints(args: dict[str, Any]) -> dict[str, Any]:
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


def _filters(args: dict[str, Any]) -> retrieval_pb2.RetrievalFilters:
    filters = retrieval_pb2.RetrievalFilters(
        repository=args.get("repository") or "",
        branch=args.get("branch") or "",
        code_path=args.get("code_path") or "",
        document_type=args.get("document_type") or "",
        source_type=args.get("source_type") or "",
        include_predicates=args.get("include_predicates") or [],
        exclude_predicates=args.get("exclude_predicates") or [],
        conflict_handling=_CONFLICT_HANDLING[args.get("conflict_handling") or "include"],
    )
    for name in ("as_of", "known_as_of"):
        if args.get(name) is not None:
            getattr(filters, name).CopyFrom(to_timestamp(args[name]))
    if args.get("min_authority") is not None:
        filters.min_authority = args["min_authority"]
    if args.get("max_trust_tier") is not None:
        filters.max_trust_tier = args["max_trust_tier"]
    return filters


def _task_context(args: dict[str, Any]) -> knowledge_pb2.TaskContext:
    return knowledge_pb2.TaskContext(**{name: args.get(name) or "" for name in TASK_CONTEXT_NAMES})


# knowledge_bootstrap ----------------------------------------------------------------------

_RESOLUTION = {
    identity_pb2.REPOSITORY_RESOLUTION_SELECTED: "selected",
    identity_pb2.REPOSITORY_RESOLUTION_SELECTION_REQUIRED: "selection_required",
    identity_pb2.REPOSITORY_RESOLUTION_UNMAPPED: "unmapped",
    identity_pb2.REPOSITORY_RESOLUTION_UNSUPPORTED_REPOSITORY: "unsupported_repository",
    identity_pb2.REPOSITORY_RESOLUTION_PERSONAL_ONLY: "personal_only",
}


async def _resolve_root(
    ctx: CallContext, repository: str | None, branch: str | None, code_path: str | None
) -> dict[str, Any]:
    """One repository root resolved on its own (a multi-root workspace calls this per root,
    so roots are never mixed into one resolution)."""
    resolved = await ctx.backends.identity.ResolveRepository(
        identity_pb2.ResolveRepositoryRequest(
            principal_id=ctx.caller.principal_id, repository=repository or ""
        )
    )
    status = _RESOLUTION.get(resolved.resolution, "unmapped")
    candidates = [views.project(p) for p in resolved.candidates]
    return {
        "status": status,
        "canonical_repository": resolved.canonical_repository or None,
        "project": candidates[0] if status == "selected" and candidates else None,
        "candidates": candidates if status == "selection_required" else [],
        # Passed through: each worktree sends its own branch, a detached HEAD sends none.
        "branch": branch,
        "code_path": code_path,
    }


async def bootstrap(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    scopes = await _scopes(ctx)
    repository = await _resolve_root(
        ctx, args.get("repository"), args.get("branch"), args.get("code_path")
    )
    roots = [
        await _resolve_root(ctx, root["repository"], root.get("branch"), None)
        for root in args.get("roots") or []
    ]
    granted = ctx.caller.granted
    names = scope_names(ctx.settings)
    return {
        "server_version": SERVER_VERSION,
        "contract_versions": {
            "vera_integration_contract": INTEGRATION_CONTRACT_VERSION,
            "mcp_protocol": ctx.protocol_version,
        },
        "principal": {
            "principal_id": ctx.caller.principal_id,
            "personal_scope_id": scopes.personal_scope_id,
        },
        "auth_profile": ctx.caller.auth_profile,
        "capabilities": [
            {"class": cls.value, "scope": names[cls], "granted": cls in granted}
            for cls in AuthClass
        ],
        "tool_profile": ctx.settings.mcp.tool_profile,
        "visible_tools": list(ctx.visible_tools),
        "readable_projects": [views.project(p) for p in scopes.projects],
        "repository": repository,
        "roots": roots,
        "save_mode": {
            "default": "suggest",
            "allowed": ["off", "suggest", "auto-propose"],
            "auto_propose_allowed": AuthClass.PROPOSE in granted,
        },
    }


# knowledge_get_context / knowledge_get_context_pack -------------------------------------------


# Cost attribution, not part of what was asked: it stays out of the canonical request (a
# pack's identity), so two calls that differ only in it share one pack.
_ATTRIBUTION_ONLY = frozenset({"usage_ref"})


def _canonical_request(args: dict[str, Any], project: identity_pb2.Project) -> dict[str, Any]:
    request: dict[str, Any] = {}
    for name, value in args.items():
        if name in _ATTRIBUTION_ONLY:
            continue
        if name == "project":
            value = {"project_id": project.project_id, "slug": project.slug}
        elif name == "as_of":
            value = views.iso(value)
        request[name] = value
    return request


async def get_context(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    args = _binding_hints(args)
    filters = _filters(args)
    snapshot = None
    if args.get("snapshot_id") is not None:
        snapshot = await snapshot_replay.pinned_snapshot(ctx, args["snapshot_id"])
        project = await snapshot_replay.snapshot_project(ctx, snapshot, args.get("project"))
        snapshot_replay.pin_filters(filters, snapshot)
    else:
        project = await _resolve_project(ctx, args.get("project"))
    compact = args["citation_mode"] == "compact"
    assembled = await ctx.backends.retrieval.AssembleContext(
        retrieval_pb2.AssembleContextRequest(
            scope_id=project.project_id,
            query=args["query"],
            limit=args["limit"],
            token_budget=args["token_budget"],
            filters=filters,
            compact_citations=compact,
        )
    )
    if snapshot is not None:
        snapshot_replay.require_version(snapshot, assembled.assembler_version)
    content = {
        **views.retrieval_common(assembled, compact_citations=compact),
        "token_estimate": assembled.token_estimate,
        "assembler_version": assembled.assembler_version,
    }
    request = _canonical_request(args, project)
    envelope = {
        "persisted": False,
        "pack_id": None,
        **content,
        "expires_at": None,
        "request": request,
    }
    if not args["persist"]:
        return envelope
    stored = await ctx.backends.snapshot.CreateContextPack(
        snapshot_pb2.CreateContextPackRequest(
            principal_id=ctx.caller.principal_id,
            scope_id=project.project_id,
            canonical_request_json=json.dumps(request),
            content_json=json.dumps(content),
            assembler_version=assembled.assembler_version,
            usage_ref=args.get("usage_ref") or "",
        )
    )
    return _pack_envelope(stored.pack)


def _pack_envelope(pack: snapshot_pb2.ContextPack) -> dict[str, Any]:
    content = json.loads(pack.content_json)
    results = content.get("results") or []
    return {
        "persisted": True,
        "pack_id": pack.pack_id,
        "results": results,
        "conflicts": content.get("conflicts") or [],
        "freshness_warnings": content.get("freshness_warnings") or [],
        "omitted": content.get("omitted") or [],
        "empty_reason": content.get("empty_reason") if not results else None,
        "token_estimate": int(content.get("token_estimate") or 0),
        "assembler_version": pack.assembler_version or content.get("assembler_version") or "",
        "expires_at": views.ts(pack, "expires_at"),
        "created_at": views.ts(pack, "created_at"),
        "request": json.loads(pack.canonical_request_json),
    }


async def _get_pack(ctx: CallContext, pack_id: str) -> snapshot_pb2.ContextPack:
    response = await ctx.backends.snapshot.GetContextPack(
        snapshot_pb2.GetContextPackRequest(principal_id=ctx.caller.principal_id, pack_id=pack_id)
    )
    return response.pack


async def get_context_pack(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    return _pack_envelope(await _get_pack(ctx, args["pack_id"]))


# knowledge_search ----------------------------------------------------------------------------


async def search(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    args = _binding_hints(args)
    filters = _filters(args)
    snapshot = None
    if args.get("snapshot_id") is not None:
        snapshot = await snapshot_replay.pinned_snapshot(ctx, args["snapshot_id"])
        project = await snapshot_replay.snapshot_project(ctx, snapshot, args.get("project"))
        snapshot_replay.pin_filters(filters, snapshot)
        scope_ids = [project.project_id]
    elif args.get("project") is not None:
        scope_ids = [(await _resolve_project(ctx, args["project"])).project_id]
    else:
        scope_ids = [p.project_id for p in (await _scopes(ctx)).projects]
    response = await ctx.backends.retrieval.Search(
        retrieval_pb2.SearchRequest(
            scope_ids=scope_ids, query=args["query"], limit=args["limit"], filters=filters
        )
    )
    if snapshot is not None:
        snapshot_replay.require_version(snapshot, response.assembler_version)
    return views.retrieval_common(response)


# knowledge_explain_fact / knowledge_get_evidence ---------------------------------------------


async def _explain(ctx: CallContext, args: dict[str, Any]) -> knowledge_pb2.ExplainFactResponse:
    scopes = await _scopes(ctx)
    request = knowledge_pb2.ExplainFactRequest(
        scope_ids=[p.project_id for p in scopes.projects], fact_key=args["fact_key"]
    )
    for name in ("as_of", "known_as_of"):
        if args.get(name) is not None:
            getattr(request, name).CopyFrom(to_timestamp(args[name]))
    try:
        return await ctx.backends.knowledge.ExplainFact(request)
    except NotFound:
        # A missing and an out-of-scope fact read the same, as the knowledge service says it.
        raise InvalidInput("fact_key", reason="not_found") from None


async def explain_fact(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    explained = await _explain(ctx, args)
    assertions = [views.assertion(a) for a in explained.assertions]
    return {
        "fact": views.fact(explained.fact),
        "supporting": [a for a in assertions if a["supports"]],
        "refuting": [a for a in assertions if not a["supports"]],
    }


async def get_evidence(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    explained = await _explain(ctx, args)
    rows: list[dict[str, Any]] = []
    for a in explained.assertions:
        base = {
            "fact_key": explained.fact.fact_key,
            "assertion_id": a.assertion_id,
            "supports": a.supports,
            "verification": views.verification(a.verification),
            "trust_tier": a.trust_tier,
            "authority": a.authority,
            "source": views.source(a.source) if a.HasField("source") else None,
        }
        if not a.evidence:
            rows.append({**base, "evidence_id": None, "text": None, "locator": None})
        for e in a.evidence:
            rows.append(
                {**base, "evidence_id": e.evidence_id, "text": e.text, "locator": e.locator}
            )
    return {
        "fact_key": explained.fact.fact_key,
        "evidence": rows[: args["limit"]],
        "total": len(rows),
        # No evidence is an answer with a reason, not an error.
        "empty_reason": None if rows else "no_evidence_recorded",
    }


# knowledge_feedback --------------------------------------------------------------------------


async def feedback(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    pack_id, result_ref = args["context_pack_id"], args["result_ref"]
    # Principal-scoped read: a foreign or expired pack fails expired_context_pack.
    pack = _pack_envelope(await _get_pack(ctx, pack_id))
    # Query, rank and signal vector come from the pack, never from the caller.
    rank, signal_vector, fact_key = 0, {}, ""
    if result_ref != pack_id:
        found = next((r for r in pack["results"] if r.get("result_ref") == result_ref), None)
        if found is None:
            raise InvalidInput("result_ref", reason="not_in_pack")
        rank = int(found.get("rank") or 0)
        signal_vector = {k: float(v) for k, v in (found.get("signals") or {}).items()}
        fact_key = found.get("fact_key") or ""
    scopes = await _scopes(ctx)
    recorded = await ctx.backends.knowledge.RecordFeedback(
        knowledge_pb2.RecordFeedbackRequest(
            principal_id=ctx.caller.principal_id,
            personal_scope_id=scopes.personal_scope_id,
            pack_id=pack_id,
            result_ref=result_ref,
            signal=args["signal"],
            query=str(pack["request"].get("query") or ""),
            rank=rank,
            signal_vector=signal_vector,
            fact_key=fact_key,
        )
    )
    return {
        "feedback_id": recorded.feedback_id,
        "context_pack_id": pack_id,
        "result_ref": result_ref,
        "signal": recorded.signal,
        "created": recorded.created,
        "recorded_at": views.ts(recorded, "recorded_at"),
        "level": "pack" if result_ref == pack_id else "result",
    }


# Proposal lifecycle --------------------------------------------------------------------------


async def _proposal_target(ctx: CallContext, args: dict[str, Any]) -> str:
    """The shared project whose curators review a proposal: the explicit ``project``, else
    the one project ``repository_ref`` maps to, else none (it stays personal only). Never
    every readable project: joining a workspace must not route one's proposals to it."""
    if args.get("project"):
        project = await _resolve_project(ctx, args["project"])
        return project.project_id if project.kind == identity_pb2.PROJECT_KIND_SHARED else ""
    if not args.get("repository_ref"):
        return ""
    resolved = await ctx.backends.identity.ResolveRepository(
        identity_pb2.ResolveRepositoryRequest(
            principal_id=ctx.caller.principal_id, repository=args["repository_ref"]
        )
    )
    if resolved.resolution != identity_pb2.REPOSITORY_RESOLUTION_SELECTED:
        return ""
    return resolved.candidates[0].project_id


async def propose(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    scopes = await _scopes(ctx)
    target_scope_id = await _proposal_target(ctx, args)
    response = await ctx.backends.knowledge.ProposeFact(
        knowledge_pb2.ProposeFactRequest(
            principal_id=ctx.caller.principal_id,
            personal_scope_id=scopes.personal_scope_id,
            readable_scope_ids=[p.project_id for p in scopes.projects],
            subject=args["subject"],
            predicate=args["predicate"],
            object=args["object"],
            evidence_text=args.get("evidence_text") or "",
            context=_task_context(args),
            target_scope_id=target_scope_id,
        )
    )
    return {
        "outcome": views.outcome(response.outcome),
        "fact": views.optional_fact(response, "fact"),
        "attempt_id": response.attempt_id,
        "reason": response.reason or None,
        "conflicting_fact_keys": list(response.conflicting_fact_keys),
    }


_RETRACTION = {
    knowledge_pb2.RETRACTION_STATUS_RETRACTED: "retracted",
    knowledge_pb2.RETRACTION_STATUS_ALREADY_RETRACTED: "already_retracted",
}


async def retract_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    scopes = await _scopes(ctx)
    try:
        response = await ctx.backends.knowledge.RetractProposal(
            knowledge_pb2.RetractProposalRequest(
                principal_id=ctx.caller.principal_id,
                personal_scope_id=scopes.personal_scope_id,
                fact_key=args["fact_key"],
            )
        )
    except NotFound:
        # Only the caller's own pending proposals can be retracted.
        raise InvalidInput("fact_key", reason="not_found") from None
    status = _RETRACTION.get(response.status)
    if status is None:
        raise RuntimeError("retraction status unset")
    return {"status": status, "fact": views.optional_fact(response, "fact")}


async def proposal_report(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    response = await ctx.backends.knowledge.GetProposalReport(
        knowledge_pb2.GetProposalReportRequest(
            principal_id=ctx.caller.principal_id,
            context=_task_context(args),
            page_size=args["limit"],
            page_token=args.get("cursor") or "",
        )
    )
    return {
        "attempts": [views.attempt(a) for a in response.attempts],
        "next_cursor": response.next_page_token or None,
        "counts": {
            views.normalize_key(k, "PROPOSAL_OUTCOME_"): v
            for k, v in sorted(response.outcome_counts.items())
        },
        "state_counts": {
            views.normalize_key(k, "FACT_STATE_"): v
            for k, v in sorted(response.state_counts.items())
        },
        "total": response.total_attempts,
    }


HANDLERS: dict[str, Handler] = {
    "knowledge_bootstrap": bootstrap,
    "knowledge_get_context": get_context,
    "knowledge_search": search,
    "knowledge_get_context_pack": get_context_pack,
    "knowledge_explain_fact": explain_fact,
    "knowledge_get_evidence": get_evidence,
    "knowledge_feedback": feedback,
    "knowledge_propose": propose,
    "knowledge_retract_proposal": retract_proposal,
    "knowledge_proposal_report": proposal_report,
}
