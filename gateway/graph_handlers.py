"""Tool bodies and text renderings of the knowledge-graph tools: each body is one or two
gRPC calls and back.

The specs in ``graph_tools`` name them. Arguments arrive bounds-checked with defaults filled.
"""

from __future__ import annotations

from typing import Any

from vera.gateway import views
from vera.gateway.call_context import CallContext, scope_ids, with_time_bounds
from vera.gateway.render import UNTRUSTED
from vera.knowledge.v1 import knowledge_service_pb2 as pb

_CONFLICT_FILTER = {
    "include": pb.CONFLICT_FILTER_INCLUDE,
    "exclude": pb.CONFLICT_FILTER_EXCLUDE,
    "only": pb.CONFLICT_FILTER_ONLY,
}


def _freshness(facts: list[pb.Fact]) -> list[dict[str, Any]]:
    """The cited sources knowledge marked stale, once per fact and source."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for f in facts:
        for c in f.citations:
            if c.stale and (f.fact_key, c.source_id) not in seen:
                seen.add((f.fact_key, c.source_id))
                out.append(
                    {
                        "fact_key": f.fact_key,
                        "source_id": c.source_id,
                        "reason": c.stale_reason or "source_stale",
                        "observed_at": views.ts(c, "observed_at"),
                    }
                )
    return out


def _entity(e: pb.Entity) -> dict[str, Any]:
    return {
        "entity_id": e.entity_id or None,
        "project_id": e.scope_id or None,
        "name": e.name,
        "aliases": list(e.aliases),
        "kind": e.kind,
    }


def _community(c: pb.Community) -> dict[str, Any]:
    r = c.run
    return {
        "community_id": c.community_id,
        "project_id": c.scope_id,
        "label": c.label,
        "summary": c.summary,
        "summary_kind": r.summarizer,
        "entities": list(c.entities),
        "authoritative": False,
        "derivation_run": {
            "derivation_run_id": r.run_id,
            "algorithm": r.algorithm,
            "seed": r.seed,
            "summarizer": r.summarizer,
            "change_position": r.change_position,
            "fact_count": r.fact_count,
            "entity_count": r.entity_count,
            "created_at": views.ts(r, "created_at"),
        },
        "lineage_fact_count": c.fact_count,
        "score": c.score,
    }


# Handlers --------------------------------------------------------------------------------


async def get_fact(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.GetFactRequest(scope_ids=await scope_ids(ctx, None), fact_key=args["fact_key"])
    response = await ctx.backends.knowledge.GetFact(with_time_bounds(request, args))
    return {
        "fact": views.fact(response.fact) if response.HasField("fact") else None,
        "versions": [
            {
                "version_id": v.version_id,
                "state": views.state(v.state),
                "valid_from": views.ts(v, "valid_from"),
                "valid_to": views.ts(v, "valid_to"),
                "recorded_at": views.ts(v, "recorded_at"),
                "superseded_at": views.ts(v, "superseded_at"),
                "superseded_by": v.superseded_by or None,
                "corrects": v.corrects or None,
                "correction_reason": v.correction_reason or None,
            }
            for v in response.versions
        ],
        "empty_reason": response.empty_reason or None,
    }


async def get_entity(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.GetEntityRequest(
        scope_ids=await scope_ids(ctx, args.get("project")),
        name=args.get("entity") or "",
        entity_id=args.get("entity_id") or "",
        page_size=args["limit"],
        conflict_filter=_CONFLICT_FILTER[args["conflict_handling"]],
    )
    response = await ctx.backends.knowledge.GetEntity(with_time_bounds(request, args))
    facts = list(response.facts)
    return {
        "entity": _entity(response.entity),
        "facts": [views.fact(f) for f in facts],
        "total_facts": response.total_facts,
        "total_facts_is_lower_bound": response.total_facts_is_lower_bound,
        "freshness_warnings": _freshness(facts),
        "empty_reason": None if facts else "no_related_facts",
    }


async def get_source(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.GetSourceRequest(
        scope_ids=await scope_ids(ctx, args.get("project")), source_id=args["source_id"]
    )
    response = await ctx.backends.knowledge.GetSource(with_time_bounds(request, args))
    fr = response.freshness
    warnings = []
    if fr.stale:
        warnings.append(
            {
                "fact_key": "",
                "source_id": response.source.source_id,
                "reason": fr.reason,
                "observed_at": views.ts(response.source, "observed_at"),
            }
        )
    return {
        "source": views.source(response.source),
        "project_id": response.scope_id,
        "versions": [
            {
                "version": v.version,
                "source_type": v.source_type,
                "title": v.title,
                "uri": v.uri,
                "observed_at": views.ts(v, "observed_at"),
                "recorded_at": views.ts(v, "recorded_at"),
            }
            for v in response.versions
        ],
        "freshness": {
            "stale": fr.stale,
            "age_days": fr.age_days,
            "stale_after_days": fr.stale_after_days,
            "reason": fr.reason or None,
        },
        "cited_by_facts": response.cited_by_facts,
        "freshness_warnings": warnings,
    }


async def explore(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.ExploreGraphRequest(
        scope_ids=await scope_ids(ctx, args.get("project")),
        name=args.get("entity") or "",
        entity_id=args.get("entity_id") or "",
        depth=args["depth"],
        page_size=args["limit"],
        conflict_filter=_CONFLICT_FILTER[args["conflict_handling"]],
    )
    response = await ctx.backends.knowledge.ExploreGraph(with_time_bounds(request, args))
    facts = [e.fact for e in response.edges]
    return {
        "entity": _entity(response.entity),
        "depth": args["depth"],
        "edges": [
            {"hop": e.hop, "from": e.from_node, "to": e.to_node, "fact": views.fact(e.fact)}
            for e in response.edges
        ],
        "nodes": list(response.nodes),
        "truncated": response.truncated,
        "freshness_warnings": _freshness(facts),
        "empty_reason": None if facts else "no_edges",
    }


async def get_changes(
    ctx: CallContext,
    args: dict[str, Any],
    *,
    newest_first: bool = False,
    changes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The scoped change feed, oldest first; the legacy alias reads it newest first and
    filtered to ``changes`` (kinds of change)."""
    request = pb.ListScopeChangesRequest(
        scope_ids=await scope_ids(ctx, args.get("project")),
        page_size=args["limit"],
        page_token=args.get("cursor") or "",
        newest_first=newest_first,
        changes=list(changes),
    )
    response = await ctx.backends.knowledge.ListScopeChanges(with_time_bounds(request, args))
    entries = [
        {
            "position": c.position,
            "change": c.change,
            "project_id": c.scope_id,
            "fact": views.fact(c.fact) if c.HasField("fact") else None,
            "source_id": c.source_id or None,
            "created_at": views.ts(c, "created_at"),
        }
        for c in response.changes
    ]
    return {
        "changes": entries,
        "next_cursor": response.next_page_token,
        "has_more": response.has_more,
        "empty_reason": None if entries else "no_new_changes",
    }


async def get_conflicts(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.ListConflictsRequest(
        scope_ids=await scope_ids(ctx, args.get("project")),
        page_size=args["limit"],
        page_token=args.get("cursor") or "",
    )
    response = await ctx.backends.knowledge.ListConflicts(with_time_bounds(request, args))
    groups = [
        {
            "project_id": g.scope_id,
            "subject": g.subject,
            "predicate": g.predicate,
            "facts": [views.fact(f) for f in g.facts],
        }
        for g in response.conflicts
    ]
    return {
        "conflicts": groups,
        "next_cursor": response.next_page_token or None,
        "total": response.total,
        "total_is_lower_bound": response.total_is_lower_bound,
        "ontology_version": response.ontology_version,
        "empty_reason": None if groups else "no_conflicts",
    }


async def search_communities(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.SearchCommunitiesRequest(
        scope_ids=await scope_ids(ctx, args.get("project")),
        query=args["query"],
        page_size=args["limit"],
    )
    response = await ctx.backends.knowledge.SearchCommunities(with_time_bounds(request, args))
    return {
        "communities": [_community(c) for c in response.communities],
        "authoritative": False,
        "empty_reason": response.empty_reason or None,
    }


async def get_community_lineage(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    request = pb.GetCommunityLineageRequest(
        scope_ids=await scope_ids(ctx, None),
        community_id=args["community_id"],
        page_size=args["limit"],
        page_token=args.get("cursor") or "",
    )
    response = await ctx.backends.knowledge.GetCommunityLineage(with_time_bounds(request, args))
    return {
        "community": _community(response.community),
        "facts": [views.fact(f) for f in response.facts],
        "next_cursor": response.next_page_token or None,
        "total": response.total,
        "total_is_lower_bound": response.total_is_lower_bound,
    }


# Text renderings -------------------------------------------------------------------------


def _line(f: dict[str, Any]) -> str:
    cites = "; ".join(
        f"{c.get('source_id') or 'agent-proposed'} [{c.get('verification')}]"
        for c in f.get("citations") or []
    )
    extra = ""
    if f.get("superseded_by"):
        extra += f" superseded_by={f['superseded_by']}"
    if f.get("conflicting_fact_keys"):
        extra += " DISPUTED"
    return (
        f"{f['subject']} {f['predicate']} {f['object']} [{f['state']}, tier {f['trust_tier']}]"
        f" fact_key={f['fact_key']}{extra} — {cites or 'no citation'}"
    )


def _warnings(data: dict[str, Any]) -> list[str]:
    return [
        f"Freshness: {w['source_id']} is stale (observed {w.get('observed_at')})."
        for w in data.get("freshness_warnings") or []
    ]


def render_fact(data: dict[str, Any]) -> str:
    lines = [UNTRUSTED]
    if data["fact"]:
        lines.append(_line(data["fact"]))
    else:
        lines.append(f"No version at that time ({data.get('empty_reason')}).")
    for v in data["versions"]:
        lines.append(
            f"  version {v['version_id']}: {v['state']} recorded {v['recorded_at']}"
            f" until {v['superseded_at'] or 'now'}"
        )
    return "\n".join(lines)


def render_entity(data: dict[str, Any]) -> str:
    e = data["entity"]
    lines = [f"Entity {e['name']} (aliases: {', '.join(e['aliases']) or 'none'})", UNTRUSTED]
    lines += [_line(f) for f in data["facts"]] or [f"No related facts ({data['empty_reason']})."]
    if data["total_facts"] > len(data["facts"]):
        total = data["total_facts"]
        of = f"at least {total}" if data["total_facts_is_lower_bound"] else str(total)
        lines.append(f"{len(data['facts'])} of {of} related facts shown.")
    return "\n".join(lines + _warnings(data))


def render_source(data: dict[str, Any]) -> str:
    s, fr = data["source"], data["freshness"]
    return "\n".join(
        [
            f"Source {s['source_id']}: {s.get('title')} <{s.get('uri')}>",
            UNTRUSTED,
            f"{len(data['versions'])} artifact version(s); cited by {data['cited_by_facts']} facts;"
            f" {'STALE (' + str(fr['reason']) + ')' if fr['stale'] else 'fresh'}",
        ]
    )


def render_explore(data: dict[str, Any]) -> str:
    lines = [f"Neighborhood of {data['entity']['name']} to depth {data['depth']}", UNTRUSTED]
    lines += [f"hop {e['hop']}: {_line(e['fact'])}" for e in data["edges"]] or ["No edges."]
    if data["truncated"]:
        lines.append("Truncated at the limit.")
    return "\n".join(lines + _warnings(data))


def render_changes(data: dict[str, Any]) -> str:
    lines = [
        f"{c['position']} {c['change']}: "
        + (_line(c["fact"]) if c["fact"] else str(c["source_id"]))
        for c in data["changes"]
    ]
    lines = lines or ["No changes."]
    return "\n".join([UNTRUSTED, *lines, f"next_cursor={data['next_cursor']}"])


def _total(data: dict[str, Any]) -> str:
    """A total as counted: "at least N" when the service stopped counting."""
    bounded = data.get("total_is_lower_bound", False)
    return f"at least {data['total']}" if bounded else str(data["total"])


def render_conflicts(data: dict[str, Any]) -> str:
    lines = [f"{_total(data)} conflict(s) (ontology {data['ontology_version']})", UNTRUSTED]
    for g in data["conflicts"]:
        lines.append(f"{g['subject']} {g['predicate']}:")
        lines += [f"  {_line(f)}" for f in g["facts"]]
    return "\n".join(lines)


def render_communities(data: dict[str, Any]) -> str:
    lines = ["Community summaries are NOT authoritative; cite the lineage facts instead."]
    for c in data["communities"]:
        lines.append(f"{c['community_id']} {c['label']}: {c['summary']}")
    if not data["communities"]:
        lines.append(f"None ({data['empty_reason']}).")
    return "\n".join(lines)


def render_lineage(data: dict[str, Any]) -> str:
    c = data["community"]
    lines = [f"Lineage of community {c['label']} ({_total(data)} facts)", UNTRUSTED]
    return "\n".join(lines + [_line(f) for f in data["facts"]])
