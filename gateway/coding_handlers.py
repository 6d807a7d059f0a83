"""Tool bodies and text renderings of the coding tools: each body is a translation to one
or a few gRPC calls and back to JSON.

No business rules live here. Arguments arrive already bounds-checked with defaults
filled (timestamps as aware datetimes); failures are ``VeraError`` from the services,
which the guard maps to the MCP error contract. The specs in ``coding_tools`` name them.
"""

from __future__ import annotations

import json
from typing import Any

from vera import INTEGRATION_CONTRACT_VERSION, SERVER_VERSION
from vera.errors import InvalidInput, NotFound
from vera.gateway import call_context, schemas, views
from vera.gateway.auth import AuthClass, scope_names
from vera.gateway.call_context import CallContext
from vera.gateway.render import UNTRUSTED
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.retrieval.v1 import retrieval_pb2
from vera.snapshot.v1 import snapshot_pb2


def _task_context(args: dict[str, Any]) -> knowledge_pb2.TaskContext:
    # The task-context arguments are named after the message's fields.
    fields = knowledge_pb2.TaskContext.DESCRIPTOR.fields
    return knowledge_pb2.TaskContext(**{f.name: args.get(f.name) or "" for f in fields})


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
    scopes = await call_context.scopes(ctx)
    repository = await _resolve_root(
        ctx, args.get("repository"), args.get("branch"), args.get("code_path")
    )
    roots = [
        await _resolve_root(ctx, root["repository"], root.get("branch"), None)
        for root in args.get("roots") or []
    ]
    granted = ctx.caller.granted
    names = scope_names(ctx.settings)
    policy = await ctx.backends.knowledge.GetProposalPolicy(
        knowledge_pb2.GetProposalPolicyRequest()
    )
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
        "proposal_policy": {
            "allowed_predicates": list(policy.allowed_predicates),
            "single_valued_predicates": list(policy.single_valued_predicates),
            "ontology_version": policy.ontology_version,
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
    args = call_context.binding_hints(args)
    filters = call_context.filters(args)
    snapshot = None
    if args.get("snapshot_id") is not None:
        snapshot, project = await call_context.pin_to_snapshot(
            ctx, args["snapshot_id"], args.get("project"), filters
        )
    else:
        project = await call_context.resolve_project(ctx, args.get("project"))
    compact = args["citation_mode"] == "compact"
    assembled = await ctx.backends.retrieval.AssembleContext(
        retrieval_pb2.AssembleContextRequest(
            scope_id=project.project_id,
            query=args["query"],
            limit=args["limit"],
            token_budget=args["token_budget"],
            filters=filters,
            compact_citations=compact,
            assembler_version=snapshot.assembler_version if snapshot is not None else "",
        )
    )
    if snapshot is not None:
        call_context.require_version(snapshot, assembled.assembler_version)
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
        # A pack stored before the field existed was assembled hybrid.
        "retrieval_mode": content.get("retrieval_mode") or schemas.HYBRID_MODE,
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
    args = call_context.binding_hints(args)
    filters = call_context.filters(args)
    snapshot = None
    if args.get("snapshot_id") is not None:
        snapshot, project = await call_context.pin_to_snapshot(
            ctx, args["snapshot_id"], args.get("project"), filters
        )
        scope_ids = [project.project_id]
    else:
        scope_ids = await call_context.scope_ids(ctx, args.get("project"))
    response = await ctx.backends.retrieval.Search(
        retrieval_pb2.SearchRequest(
            scope_ids=scope_ids,
            query=args["query"],
            limit=args["limit"],
            filters=filters,
            assembler_version=snapshot.assembler_version if snapshot is not None else "",
        )
    )
    if snapshot is not None:
        call_context.require_version(snapshot, response.assembler_version)
    return views.retrieval_common(response)


# knowledge_explain_fact / knowledge_get_evidence ---------------------------------------------


async def _explain(ctx: CallContext, args: dict[str, Any]) -> knowledge_pb2.ExplainFactResponse:
    scopes = await call_context.scopes(ctx)
    request = knowledge_pb2.ExplainFactRequest(
        scope_ids=[p.project_id for p in scopes.projects], fact_key=args["fact_key"]
    )
    try:
        return await ctx.backends.knowledge.ExplainFact(
            call_context.with_time_bounds(request, args)
        )
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
    stored = await _get_pack(ctx, pack_id)
    pack = _pack_envelope(stored)
    # Query, rank and signal vector come from the pack, never from the caller.
    rank, signal_vector, fact_key = 0, {}, ""
    attribution = knowledge_pb2.FEEDBACK_ATTRIBUTION_PACK
    if result_ref != pack_id:
        attribution = knowledge_pb2.FEEDBACK_ATTRIBUTION_RESULT
        found = next((r for r in pack["results"] if r.get("result_ref") == result_ref), None)
        if found is None:
            raise InvalidInput("result_ref", reason="not_in_pack")
        rank = int(found.get("rank") or 0)
        # A degraded pack's dense signals are zeros, not measurements: its feedback is kept
        # without a vector, so no ranking model learns from it.
        if pack["retrieval_mode"] == schemas.HYBRID_MODE:
            signal_vector = {k: float(v) for k, v in (found.get("signals") or {}).items()}
        fact_key = found.get("fact_key") or ""
    scopes = await call_context.scopes(ctx)
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
            attribution=attribution,
            pack_scope_id=stored.scope_id,
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


async def _proposal_target(ctx: CallContext, args: dict[str, Any]) -> tuple[str, str]:
    """The shared project whose curators review a proposal (its id and slug): the explicit
    ``project``, else the one project ``repository_ref`` maps to, else none (it stays
    personal only). Never every readable project: joining a workspace must not route
    one's proposals to it."""
    if args.get("project"):
        project = await call_context.resolve_project(ctx, args["project"])
        if project.kind != identity_pb2.PROJECT_KIND_SHARED:
            return "", ""
        return project.project_id, project.slug
    if not args.get("repository_ref"):
        return "", ""
    resolved = await ctx.backends.identity.ResolveRepository(
        identity_pb2.ResolveRepositoryRequest(
            principal_id=ctx.caller.principal_id, repository=args["repository_ref"]
        )
    )
    if resolved.resolution != identity_pb2.REPOSITORY_RESOLUTION_SELECTED:
        return "", ""
    return resolved.candidates[0].project_id, resolved.candidates[0].slug


async def propose(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    scopes = await call_context.scopes(ctx)
    target_scope_id, target_slug = await _proposal_target(ctx, args)
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
            branch=args.get("branch") or "",
            code_path=args.get("code_path") or "",
        )
    )
    return {
        "outcome": views.outcome(response.outcome),
        "fact": views.optional_fact(response, "fact"),
        "attempt_id": response.attempt_id,
        "reason": response.reason or None,
        "conflicting_fact_keys": list(response.conflicting_fact_keys),
        # Whose curators see it in their review queue; null: no shared project's (it
        # stays in the caller's personal scope).
        "review_project": target_slug or None,
    }


_RETRACTION = {
    knowledge_pb2.RETRACTION_STATUS_RETRACTED: "retracted",
    knowledge_pb2.RETRACTION_STATUS_ALREADY_RETRACTED: "already_retracted",
}


async def retract_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    scopes = await call_context.scopes(ctx)
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


# Text renderings ---------------------------------------------------------------------------


def _citations(result: dict[str, Any]) -> str:
    parts = []
    for c in result.get("citations") or []:
        label = c.get("source_id") or "agent-proposed"
        if c.get("locator"):
            label += f" {c['locator']}"
        parts.append(f"{label} [{c.get('verification')}]")
    return "; ".join(parts) if parts else "no citation"


def _fact_line(f: dict[str, Any]) -> str:
    line = (
        f"{f['subject']} {f['predicate']} {f['object']} "
        f"[{f['state']}, tier {f['trust_tier']}, authority {f['authority']:.2f}] "
        f"fact_key={f['fact_key']}"
    )
    if f.get("superseded_by"):
        line += f" superseded_by={f['superseded_by']}"
    return line


def _retrieval(data: dict[str, Any], heading: str) -> str:
    results = data.get("results") or []
    lines = [heading, UNTRUSTED]
    if data.get("pack_id"):
        lines.append(f"pack_id={data['pack_id']} expires_at={data.get('expires_at')}")
    if data.get("retrieval_mode") == schemas.DEGRADED_MODE:
        lines.append(
            "DEGRADED: the vector index was unavailable; lexical matches only "
            "(retrieval_mode=lexical_only)."
        )
    if not results:
        lines.append(f"No results ({data.get('empty_reason')}). Say so rather than guess.")
    for r in results:
        lines.append(f"{r['rank']}. {_fact_line(r)} result_ref={r['result_ref']}")
        lines.append(f"   cite: {_citations(r)}")
    for c in data.get("conflicts") or []:
        lines.append(
            f"CONFLICT: {c['subject']} {c['predicate']} disputed by {', '.join(c['fact_keys'])}"
        )
    for w in data.get("freshness_warnings") or []:
        lines.append(f"FRESHNESS: {w['fact_key']} ({w['source_id']}): {w['reason']}")
    if data.get("omitted"):
        lines.append(f"Omitted: {len(data['omitted'])} candidate(s).")
    return "\n".join(lines)


def render_context(data: dict[str, Any]) -> str:
    heading = (
        f"Context: {len(data.get('results') or [])} result(s), "
        f"~{data.get('token_estimate', 0)} tokens, persisted={str(data['persisted']).lower()}."
    )
    return _retrieval(data, heading)


def render_search(data: dict[str, Any]) -> str:
    return _retrieval(data, f"Search: {len(data.get('results') or [])} result(s).")


def render_bootstrap(data: dict[str, Any]) -> str:
    repo, policy = data["repository"], data["proposal_policy"]
    granted = [c["class"] for c in data["capabilities"] if c["granted"]]
    lines = [
        f"VERA {data['server_version']} (integration contract "
        f"{data['contract_versions']['vera_integration_contract']}), "
        f"auth profile {data['auth_profile']}, tool profile {data['tool_profile']}.",
        f"Principal {data['principal']['principal_id']}; granted: {', '.join(granted) or 'none'}.",
        f"Readable projects: {', '.join(p['slug'] for p in data['readable_projects']) or 'none'}.",
        f"Repository: {repo['status']}"
        + (f" -> {repo['project']['slug']}" if repo.get("project") else "")
        + (
            f" (choose one of: {', '.join(c['slug'] for c in repo['candidates'])})"
            if repo.get("candidates")
            else ""
        ),
        f"Save mode default {data['save_mode']['default']}; auto-propose allowed: "
        f"{str(data['save_mode']['auto_propose_allowed']).lower()}.",
        f"Proposal predicates (ontology {policy['ontology_version']}): "
        f"{', '.join(policy['allowed_predicates']) or 'none'}; single-valued: "
        f"{', '.join(policy['single_valued_predicates']) or 'none'}.",
    ]
    return "\n".join(lines)


def render_explain(data: dict[str, Any]) -> str:
    lines = [_fact_line(data["fact"]), UNTRUSTED]
    for label, group in (("supports", data["supporting"]), ("refutes", data["refuting"])):
        for a in group:
            source = a["source"]["source_id"] if a.get("source") else "no source"
            lines.append(
                f"- {label}: {source} [{a['verification']}, tier {a['trust_tier']}], "
                f"{len(a['evidence'])} evidence item(s)"
            )
    return "\n".join(lines)


def render_evidence(data: dict[str, Any]) -> str:
    if not data["evidence"]:
        return f"No evidence for {data['fact_key']} ({data['empty_reason']})."
    lines = [
        f"Evidence for {data['fact_key']}: {len(data['evidence'])} of {data['total']}.",
        UNTRUSTED,
    ]
    for row in data["evidence"]:
        source = row["source"]["source_id"] if row.get("source") else "no source"
        lines.append(
            f"- {source} {row.get('locator') or ''} [{row['verification']}]: "
            f"{row.get('text') or ''}"
        )
    return "\n".join(lines)


def render_pack(data: dict[str, Any]) -> str:
    return render_context(data)


def render_feedback(data: dict[str, Any]) -> str:
    verb = "Recorded" if data["created"] else "Already recorded"
    return f"{verb} {data['signal']} feedback on {data['level']} {data['result_ref']}."


def render_propose(data: dict[str, Any]) -> str:
    outcome, reason = data["outcome"], data.get("reason")
    text = f"Proposal {outcome}"
    if data.get("fact"):
        text += f": {_fact_line(data['fact'])}"
    if reason:
        text += f" (reason: {reason})"
    if outcome == "conflicted":
        return text + (
            ". Nothing was created: it contradicts active fact(s) "
            f"{', '.join(data['conflicting_fact_keys'])}."
        )
    if outcome in ("created", "deduplicated"):
        if data.get("review_project"):
            return text + (f". It awaits verification by the curators of project "
                           f"{data['review_project']}.")
        return text + (". It is personal: no shared project's curators review it (name "
                       "the project, or the repository_ref a project maps).")
    return text + ". Nothing was created."


def render_retract(data: dict[str, Any]) -> str:
    return f"Proposal {data['status'].replace('_', ' ')}."


def _attempt_line(a: dict[str, Any]) -> str:
    """One attempt of the report: why it was refused, what it contradicts, or the state
    of the fact it touched (and the key that replaced it)."""
    line = f"- {a['outcome']}"
    if a.get("reason"):
        line += f" (reason: {a['reason']})"
    statement = " ".join(x for x in (a["subject"], a["predicate"], a["object"]) if x)
    if statement:  # a refused attempt keeps none of its text
        line += f": {statement}"
    if a["outcome"] == "conflicted":
        return line + (
            "; nothing was created: it contradicts active fact(s) "
            f"{', '.join(a['conflicting_fact_keys'])}"
        )
    if a["outcome"] == "rejected":
        return line + "; nothing was created"
    line += f" [now {a['fact_state']}] fact_key={a['fact_key']}"
    if a.get("superseded_by"):
        line += f" superseded_by={a['superseded_by']}"
    return line


def render_report(data: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in data["counts"].items()) or "none"
    lines = [f"Proposal report: {data['total']} attempt(s) ({counts})."]
    lines += [_attempt_line(a) for a in data["attempts"]]
    if data.get("next_cursor"):
        lines.append(f"More: cursor={data['next_cursor']}")
    return "\n".join(lines)
