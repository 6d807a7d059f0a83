"""Knowledge-model rules over the fact graph: entity resolution, conflict filters, source
freshness, change classification, community clustering and the summarizer port.

Pure code: no gRPC, no asyncpg. networkx is the clustering engine.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

import networkx as nx

from vera import limits
from vera.errors import InvalidInput

from .domain import Edge, FactView, SourceView, normalize, source_stale

EXPLORE_DEPTH_MAX = limits.DEPTH[1]
EXPLORE_PAGE_DEFAULT, EXPLORE_PAGE_MAX = 50, limits.LIMIT_FEED[1]
ENTITY_PAGE_DEFAULT, ENTITY_PAGE_MAX = 100, limits.LIMIT_ENTITY[1]
CONFLICTS_PAGE_DEFAULT, CONFLICTS_PAGE_MAX = 50, limits.LIMIT_FEED[1]
FEED_PAGE_DEFAULT, FEED_PAGE_MAX = 50, limits.LIMIT_FEED[1]
COMMUNITY_PAGE_DEFAULT, COMMUNITY_PAGE_MAX = 10, limits.LIMIT_COMMUNITIES[1]
LINEAGE_PAGE_DEFAULT, LINEAGE_PAGE_MAX = 50, limits.LIMIT_FEED[1]
MAX_CANDIDATES = 10

LOUVAIN = "louvain"
LOUVAIN_SEED = 7
SUMMARY_FACTS = 8


class ConflictFilter(StrEnum):
    INCLUDE = "include"
    EXCLUDE = "exclude"
    ONLY = "only"


def rank_facts(facts: Iterable[FactView]) -> list[FactView]:
    """Best trust tier, then higher authority, then stable by key."""
    return sorted(facts, key=lambda f: (f.trust_tier, -f.authority, f.fact_key))


# --- entities ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EntityView:
    entity_id: uuid.UUID | None  # None: a name facts use that no curator declared
    scope_id: uuid.UUID | None
    name: str
    aliases: tuple[str, ...]
    kind: str
    alias_keys: tuple[str, ...] = ()

    @property
    def node_keys(self) -> tuple[str, ...]:
        """Every normalized name facts may use for this entity."""
        return tuple(dict.fromkeys((normalize(self.name), *self.alias_keys)))


def alias_keys(aliases: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(k for k in (normalize(a) for a in aliases) if k))


def resolve_entity(field: str, matches: Sequence[EntityView]) -> EntityView:
    """Exactly one entity, or ``invalid_input`` naming ``field``.

    Several candidates fail with the candidate list (never a silent pick); none fails
    ``not_found``. ``matches`` must already be limited to the caller's scopes.
    """
    if not matches:
        raise InvalidInput(field, "no such entity in scope", reason="not_found")
    if len(matches) > 1:
        candidates = [
            {
                "entity_id": str(m.entity_id) if m.entity_id else None,
                "name": m.name,
                "scope_id": str(m.scope_id) if m.scope_id else None,
                "kind": m.kind,
            }
            for m in sorted(matches, key=lambda m: (m.name, str(m.scope_id), str(m.entity_id)))
        ][:MAX_CANDIDATES]
        raise InvalidInput(
            field,
            "ambiguous entity name",
            reason="ambiguous",
            candidates_json=json.dumps(candidates, separators=(",", ":")),
        )
    return matches[0]


# --- sources ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceVersionView:
    version: int
    source_type: str
    title: str
    uri: str
    observed_at: datetime | None
    recorded_at: datetime


@dataclass(frozen=True)
class Freshness:
    stale: bool
    age_days: int
    stale_after_days: int
    reason: str


def freshness(observed_at: datetime | None, now: datetime, stale_after_days: int) -> Freshness:
    """The staleness of one source by the rule every citation carries (``source_stale``)."""
    if observed_at is None:
        return Freshness(False, -1, stale_after_days, "never_observed")
    stale = source_stale(observed_at, now, stale_after_days)
    age = now - observed_at
    return Freshness(stale, max(age.days, 0), stale_after_days, "source_stale" if stale else "")


@dataclass(frozen=True)
class Neighborhood:
    entity: EntityView
    edges: tuple[Edge, ...]
    nodes: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True)
class SourceDetail:
    scope_id: uuid.UUID
    source: SourceView
    versions: tuple[SourceVersionView, ...]
    freshness: Freshness
    cited_by_facts: int


# --- change feed ------------------------------------------------------------------------


# What a ledger entry can mean to a reader (classified by the store, in SQL).
CHANGE_KINDS = (
    "published",
    "correction",
    "corrected",
    "retracted",
    "proposed",
    "evidence_added",
    "source_updated",
)


def change_kinds(field: str, values: Sequence[str]) -> tuple[str, ...]:
    """The kinds of change a feed is filtered to (empty: every kind)."""
    for i, value in enumerate(values):
        if value not in CHANGE_KINDS:
            raise InvalidInput(f"{field}[{i}]", "unknown kind of change", reason="out_of_range")
    return tuple(dict.fromkeys(values))


# --- communities ------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphFact:
    fact_key: str
    version_id: uuid.UUID
    subject: str
    predicate: str
    object: str
    subject_norm: str
    object_norm: str
    trust_tier: int
    authority: float


@dataclass(frozen=True)
class CommunityDraft:
    entities: tuple[str, ...]  # display names, sorted
    facts: tuple[GraphFact, ...]  # best first


class Summarizer(Protocol):
    """The port a summarizer implements. An LLM adapter would live behind it; the default
    is extractive, because no model can be reached here."""

    name: str

    def summarize(self, draft: CommunityDraft) -> tuple[str, str]:
        """Returns (label, summary). The summary is never authoritative."""
        ...


class ExtractiveSummarizer:
    """Builds the summary from the community's own facts, verbatim; says so in the text."""

    name = "extractive-v1"

    def summarize(self, draft: CommunityDraft) -> tuple[str, str]:
        label = ", ".join(draft.entities[:3]) + (
            f" and {len(draft.entities) - 3} more" if len(draft.entities) > 3 else ""
        )
        lines = [f"{f.subject} {f.predicate} {f.object}." for f in draft.facts[:SUMMARY_FACTS]]
        more = len(draft.facts) - SUMMARY_FACTS
        summary = (
            "Extractive summary (not model-generated, non-authoritative; cite the lineage "
            f"facts instead). Entities: {', '.join(draft.entities)}. Facts: {' '.join(lines)}"
            + (f" (+{more} more facts in the lineage)" if more > 0 else "")
        )
        return label, summary


def cluster(
    facts: Sequence[GraphFact], canonical: dict[str, str], *, seed: int = LOUVAIN_SEED
) -> list[CommunityDraft]:
    """Louvain communities over the fact graph.

    Nodes are entities (aliases folded onto their canonical name via ``canonical``, a map
    of normalized name -> normalized canonical name); each fact is an edge, parallel facts
    add weight. Communities of one node carry no relation and are dropped. Deterministic
    for a given graph and seed.
    """
    graph: nx.Graph[str] = nx.Graph()
    display: dict[str, str] = {}
    for f in sorted(facts, key=lambda f: f.fact_key):
        a = canonical.get(f.subject_norm, f.subject_norm)
        b = canonical.get(f.object_norm, f.object_norm)
        display.setdefault(a, f.subject)
        display.setdefault(b, f.object)
        if a == b:
            graph.add_node(a)
            continue
        weight = graph.get_edge_data(a, b, {"weight": 0})["weight"]
        graph.add_edge(a, b, weight=weight + 1)
    if graph.number_of_nodes() == 0:
        return []
    groups = nx.community.louvain_communities(graph, weight="weight", seed=seed)
    group_of = {node: number for number, group in enumerate(groups) for node in group}
    facts_in: dict[int, list[GraphFact]] = {}
    for f in facts:
        group = group_of.get(canonical.get(f.subject_norm, f.subject_norm))
        if group is not None and group == group_of.get(
            canonical.get(f.object_norm, f.object_norm)
        ):
            facts_in.setdefault(group, []).append(f)
    drafts: list[CommunityDraft] = []
    for number, members in enumerate(groups):
        in_group = facts_in.get(number)
        if len(members) < 2 or not in_group:
            continue
        drafts.append(
            CommunityDraft(
                entities=tuple(sorted(display[n] for n in members)),
                facts=tuple(
                    sorted(in_group, key=lambda f: (f.trust_tier, -f.authority, f.fact_key))
                ),
            )
        )
    drafts.sort(key=lambda d: (-len(d.entities), d.entities))
    return drafts
