"""The knowledge-graph RPCs (corrections, entities, sources, graph, conflicts, feed,
communities) and the background community refresh: proto <-> domain translation and
nothing else. One RPC group of ``api.KnowledgeApi``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re

from vera import page_tokens, request_fields
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.rpc.timestamps import from_timestamp

from . import convert, domain, graph
from .community_store import CommunityStore
from .correction_store import CorrectionStore
from .feed_store import FeedStore
from .graph_store import GraphStore

log = logging.getLogger(__name__)

# A conflicts page continues after a conflict group (``graph_store.conflict_group_id``).
_GROUP_PREFIX = "g1:"
_GROUP_ID = re.compile(r"[0-9a-f]{32}")


def _start(request) -> tuple[str, object]:
    entity_id = request_fields.optional_uuid("entity_id", request.entity_id)
    if entity_id is None and not request.name.strip():
        raise InvalidInput("entity", "a name or an entity_id is required", reason="required")
    name = domain.bound_text("entity", request.name, domain.MAX_ENTITY).strip()
    return name, entity_id


class GraphRpcs:
    _graph: GraphStore
    _corrections: CorrectionStore
    _feed: FeedStore
    _communities: CommunityStore
    _stale_days: int
    _refresh_seconds: float
    _refresher: asyncio.Task[None] | None

    # --- background community refresh ---------------------------------------------------

    def start_refresher(self) -> None:
        """Derives communities of changed scopes every ``refresh_seconds`` (0: never)."""
        if self._refresh_seconds > 0 and self._refresher is None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def stop_refresher(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_seconds)
            try:
                for scope in await self._communities.scopes_needing_communities():
                    await self._communities.derive_communities(scope)
            except asyncio.CancelledError:
                raise
            except Exception:  # the next tick retries; reads keep serving the last run
                log.exception("community refresh failed")

    # --- RPCs ---------------------------------------------------------------------------

    async def CorrectFact(self, request: pb.CorrectFactRequest, context) -> pb.CorrectFactResponse:
        principal = request_fields.parse_uuid("principal_id", request.principal_id)
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        key = domain.require_text("fact_key", request.fact_key, domain.MAX_ID)
        if not request.HasField("replacement"):
            raise InvalidInput("replacement", "required", reason="required")
        replacement = convert.fact_input(0, scope, request.replacement)
        reason = domain.bound_text("reason", request.reason, domain.MAX_TEXT).strip()
        try:
            old, new, position, created = await self._corrections.correct_fact(
                principal, scope, key, replacement, reason
            )
        except InvalidInput as exc:
            if exc.field.startswith("facts[0]"):
                raise InvalidInput(
                    exc.field.replace("facts[0]", "replacement"), reason=exc.metadata.get("reason")
                ) from None
            raise
        return pb.CorrectFactResponse(
            corrected=convert.fact_to_proto(old),
            replacement=convert.fact_to_proto(new),
            change_position=position,
            created=created,
        )

    async def GetFact(self, request: pb.GetFactRequest, context) -> pb.GetFactResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        key = domain.require_text("fact_key", request.fact_key, domain.MAX_ID)
        fact, versions = await self._graph.get_fact(
            scopes, key, from_timestamp(request, "as_of"), from_timestamp(request, "known_as_of")
        )
        return pb.GetFactResponse(
            fact=convert.fact_to_proto(fact) if fact is not None else None,
            versions=[convert.fact_version_to_proto(v) for v in versions],
            empty_reason="" if fact is not None else "not_valid_at_as_of",
        )

    async def GetEntity(self, request: pb.GetEntityRequest, context) -> pb.GetEntityResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        name, entity_id = _start(request)
        size = request_fields.page_size(
            request.page_size, default=graph.ENTITY_PAGE_DEFAULT, maximum=graph.ENTITY_PAGE_MAX
        )
        entity, facts, total = await self._graph.get_entity(
            scopes,
            name,
            entity_id,  # type: ignore[arg-type]
            from_timestamp(request, "as_of"),
            from_timestamp(request, "known_as_of"),
            size,
            convert.conflict_filter(request.conflict_filter),
        )
        return pb.GetEntityResponse(
            entity=convert.entity_to_proto(entity),
            facts=[convert.fact_to_proto(f) for f in facts],
            total_facts=total.count,
            total_facts_is_lower_bound=total.lower_bound,
        )

    async def GetSource(self, request: pb.GetSourceRequest, context) -> pb.GetSourceResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        source_id = domain.require_text("source_id", request.source_id, domain.MAX_ID)
        if request.scope_id:
            only = request_fields.parse_uuid("scope_id", request.scope_id)
            scopes = [s for s in scopes if s == only]
        detail = await self._feed.get_source(
            scopes,
            source_id,
            from_timestamp(request, "known_as_of"),
            self._stale_days,
            from_timestamp(request, "as_of"),
        )
        return pb.GetSourceResponse(
            source=convert.source_to_proto(detail.source),
            scope_id=str(detail.scope_id),
            versions=[convert.source_version_to_proto(v) for v in detail.versions],
            freshness=convert.freshness_to_proto(detail.freshness),
            cited_by_facts=detail.cited_by_facts,
        )

    async def ExploreGraph(
        self, request: pb.ExploreGraphRequest, context
    ) -> pb.ExploreGraphResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        name, entity_id = _start(request)
        depth = request.depth or 1
        if not 1 <= depth <= graph.EXPLORE_DEPTH_MAX:
            raise InvalidInput("depth", "must be 1..5", reason="out_of_range")
        size = request_fields.page_size(
            request.page_size, default=graph.EXPLORE_PAGE_DEFAULT, maximum=graph.EXPLORE_PAGE_MAX
        )
        hood = await self._graph.explore(
            scopes,
            name,
            entity_id,  # type: ignore[arg-type]
            depth,
            size,
            from_timestamp(request, "as_of"),
            from_timestamp(request, "known_as_of"),
            convert.conflict_filter(request.conflict_filter),
        )
        return pb.ExploreGraphResponse(
            entity=convert.entity_to_proto(hood.entity),
            edges=[convert.edge_to_proto(e) for e in hood.edges],
            nodes=list(hood.nodes),
            truncated=hood.truncated,
        )

    async def ListConflicts(
        self, request: pb.ListConflictsRequest, context
    ) -> pb.ListConflictsResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        size = request_fields.page_size(
            request.page_size,
            default=graph.CONFLICTS_PAGE_DEFAULT,
            maximum=graph.CONFLICTS_PAGE_MAX,
        )
        groups, total, last = await self._graph.list_conflicts(
            scopes,
            size,
            page_tokens.decode_key(request.page_token, _GROUP_PREFIX, _GROUP_ID),
            from_timestamp(request, "as_of"),
            from_timestamp(request, "known_as_of"),
        )
        return pb.ListConflictsResponse(
            conflicts=[convert.conflict_group_to_proto(g) for g in groups],
            next_page_token=page_tokens.encode_key(last, _GROUP_PREFIX) if last else "",
            total=total.count,
            ontology_version=self._graph.ontology_version,
            total_is_lower_bound=total.lower_bound,
        )

    async def ListScopeChanges(
        self, request: pb.ListScopeChangesRequest, context
    ) -> pb.ListScopeChangesResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        size = request_fields.page_size(
            request.page_size, default=graph.FEED_PAGE_DEFAULT, maximum=graph.FEED_PAGE_MAX
        )
        after = page_tokens.decode_position(request.page_token)
        changes, last, more = await self._feed.list_scope_changes(
            scopes,
            after,
            size,
            from_timestamp(request, "as_of"),
            from_timestamp(request, "known_as_of"),
            newest_first=request.newest_first,
            changes=graph.change_kinds("changes", list(request.changes)),
        )
        return pb.ListScopeChangesResponse(
            changes=[convert.scope_change_to_proto(c) for c in changes],
            next_page_token=page_tokens.encode_position(last),
            has_more=more,
        )

    async def DeriveCommunities(
        self, request: pb.DeriveCommunitiesRequest, context
    ) -> pb.DeriveCommunitiesResponse:
        scope = request_fields.parse_uuid("scope_id", request.scope_id)
        run, created, count = await self._communities.derive_communities(scope)
        return pb.DeriveCommunitiesResponse(
            run=convert.run_to_proto(run), created=created, community_count=count
        )

    async def SearchCommunities(
        self, request: pb.SearchCommunitiesRequest, context
    ) -> pb.SearchCommunitiesResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        query = domain.require_text("query", request.query, domain.MAX_QUERY)
        size = request_fields.page_size(
            request.page_size,
            default=graph.COMMUNITY_PAGE_DEFAULT,
            maximum=graph.COMMUNITY_PAGE_MAX,
        )
        found, empty_reason = await self._communities.search_communities(
            scopes,
            query,
            size,
            from_timestamp(request, "known_as_of"),
            from_timestamp(request, "as_of"),
        )
        return pb.SearchCommunitiesResponse(
            communities=[convert.community_to_proto(c) for c in found], empty_reason=empty_reason
        )

    async def GetCommunityLineage(
        self, request: pb.GetCommunityLineageRequest, context
    ) -> pb.GetCommunityLineageResponse:
        scopes = request_fields.parse_uuids("scope_ids", list(request.scope_ids))
        community_id = request_fields.parse_uuid("community_id", request.community_id)
        size = request_fields.page_size(
            request.page_size, default=graph.LINEAGE_PAGE_DEFAULT, maximum=graph.LINEAGE_PAGE_MAX
        )
        offset = page_tokens.decode_position(request.page_token)
        community, facts, total, more = await self._communities.community_lineage(
            scopes,
            community_id,
            size,
            offset,
            from_timestamp(request, "as_of"),
            from_timestamp(request, "known_as_of"),
        )
        nxt = offset + size
        return pb.GetCommunityLineageResponse(
            community=convert.community_to_proto(community),
            facts=[convert.fact_to_proto(f) for f in facts],
            next_page_token=page_tokens.encode_position(nxt) if more else "",
            total=total.count,
            total_is_lower_bound=total.lower_bound,
        )
