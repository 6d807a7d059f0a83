"""Reads of a hub entity stay bounded by their page size: the knowledge service answers
GetEntity, ExploreGraph and ListConflicts for an entity with 10k facts within the normal
RPC deadline, and what it returns is the best-ranked page, not a truncation of everything.
Totals count up to VERA_KNOWLEDGE__MAX_COUNTED_ROWS (1000) and say when they stopped."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.services.knowledge.domain import Total, fact_key, load_ontology, normalize
from vera.services.knowledge.graph import ConflictFilter
from vera.services.knowledge.graph_store import GraphStore
from vera.services.knowledge.store import KnowledgeStore

CURATOR = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
HUB = "payments-hub"
HUB_FACTS = 10_000
COUNTED = 1000  # KnowledgeSettings.max_counted_rows' default
# The deadline every VERA client call carries (vera.rpc.client's default).
async def _copy_hub_facts(pg_dsn: str, scope: str, count: int) -> None:
    """``count`` curated facts "payments-hub depends_on dep-<i>", each with a verified
    assertion of source adr-1 and its evidence, written with COPY (the service's own
    ingest path is not what is under test; 10k row-by-row inserts would only slow the
    suite down)."""
    conn = await asyncpg.connect(pg_dsn, server_settings={"search_path": "knowledge"})
    try:
        source_pk = await conn.fetchval(
            "SELECT source_pk FROM sources WHERE scope_id = $1 AND source_id = 'adr-1'",
            uuid.UUID(scope),
        )
        rows, assertions, evidence = [], [], []
        for i in range(count):
            obj = f"dep-{i:05d}"
            key = fact_key(scope, HUB, "depends_on", obj)
            assertion_id = uuid.uuid4()
            assertions.append(
                (assertion_id, key, uuid.UUID(scope), source_pk, 2, 0.5, "verified")
            )
            evidence.append((uuid.uuid4(), assertion_id, f"{HUB} calls {obj} " * 8, "L1"))
            rows.append(
                (
                    uuid.uuid4(),
                    key,
                    uuid.UUID(scope),
                    HUB,
                    "depends_on",
                    obj,
                    normalize(HUB),
                    "depends_on",
                    normalize(obj),
                    "ACTIVE",
                    2,
                    0.5,
                    "curated",
                )
            )
        await conn.copy_records_to_table(
            "facts",
            records=rows,
            columns=[
                "version_id",
                "fact_key",
                "scope_id",
                "subject",
                "predicate",
                "object",
                "subject_norm",
                "predicate_norm",
                "object_norm",
                "state",
                "trust_tier",
                "authority",
                "origin",
            ],
        )
        await conn.copy_records_to_table(
            "assertions",
            records=assertions,
            columns=[
                "assertion_id",
                "fact_key",
                "scope_id",
                "source_pk",
                "trust_tier",
                "authority",
                "status",
            ],
        )
        await conn.copy_records_to_table(
            "evidence",
            records=evidence,
            columns=["evidence_id", "assertion_id", "text", "locator"],
        )
    finally:
        await conn.close()


@pytest.fixture
async def hub(stub, pg_dsn: str) -> str:
    """A hub entity with 10k tier-2 facts, plus three better-ranked curated facts (tier 1)
    and one single-valued conflict about it."""
    await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            sources=[pb.SourceInput(source_id="adr-1", source_type="adr", title="ADR 1")],
            entities=[pb.EntityInput(name=HUB, aliases=["hub"], kind="service")],
            facts=[
                pb.FactInput(
                    subject=HUB, predicate="owned_by", object="team-a", source_id="adr-1"
                ),
                pb.FactInput(
                    subject=HUB, predicate="owned_by", object="team-b", source_id="adr-1"
                ),
                pb.FactInput(
                    subject=HUB, predicate="runs_on", object="kubernetes", source_id="adr-1"
                ),
            ],
        )
    )
    await _copy_hub_facts(pg_dsn, PROJECT, HUB_FACTS)
    return HUB


async def test_get_entity_of_a_hub_returns_the_best_ranked_page(stub, hub) -> None:
    response = await stub.GetEntity(
        pb.GetEntityRequest(scope_ids=[PROJECT], name="hub", page_size=5)
    )
    # More match than a read counts: the total says "at least".
    assert (response.total_facts, response.total_facts_is_lower_bound) == (COUNTED, True)
    assert len(response.facts) == 5
    # The three curated tier-1 facts outrank the 10k tier-2 ones, then keys in order.
    assert [f.trust_tier for f in response.facts] == [1, 1, 1, 2, 2]
    tier_two = [f.fact_key for f in response.facts[3:]]
    assert tier_two == sorted(tier_two)


async def test_get_entity_conflict_filters_count_and_page_in_the_database(stub, hub) -> None:
    only = await stub.GetEntity(
        pb.GetEntityRequest(
            scope_ids=[PROJECT],
            name=hub,
            page_size=1,
            conflict_filter=pb.CONFLICT_FILTER_ONLY,
        )
    )
    assert (only.total_facts, only.total_facts_is_lower_bound) == (2, False)
    assert len(only.facts) == 1
    assert only.facts[0].object in {"team-a", "team-b"}
    exclude = await stub.GetEntity(
        pb.GetEntityRequest(
            scope_ids=[PROJECT],
            name=hub,
            page_size=2,
            conflict_filter=pb.CONFLICT_FILTER_EXCLUDE,
        )
    )
    assert (exclude.total_facts, exclude.total_facts_is_lower_bound) == (COUNTED, True)
    assert exclude.facts[0].object == "kubernetes"
    assert all(not f.conflicting_fact_keys for f in exclude.facts)


async def test_explore_a_hub_is_cut_at_page_size(stub, hub) -> None:
    response = await stub.ExploreGraph(
        pb.ExploreGraphRequest(scope_ids=[PROJECT], name=hub, depth=2, page_size=20)
    )
    assert response.truncated
    assert len(response.edges) == 20
    assert {e.hop for e in response.edges} == {1}
    assert len(response.nodes) == 21
    assert [e.fact.trust_tier for e in response.edges[:3]] == [1, 1, 1]


async def test_conflicts_beside_a_hub_page_with_the_keyset(stub, hub) -> None:
    first = await stub.ListConflicts(pb.ListConflictsRequest(scope_ids=[PROJECT], page_size=1))
    assert (first.total, first.total_is_lower_bound) == (1, False)
    assert [sorted(f.object for f in g.facts) for g in first.conflicts] == [["team-a", "team-b"]]
    assert first.next_page_token == ""


class _CountingConnection:
    """A real connection that counts the rows its ``fetch`` calls bring back."""

    def __init__(self, conn: asyncpg.Connection, counter: list[int]) -> None:
        self._conn = conn
        self._counter = counter

    def __getattr__(self, name: str):
        return getattr(self._conn, name)

    async def fetch(self, *args, **kwargs):
        rows = await self._conn.fetch(*args, **kwargs)
        self._counter[0] += len(rows)
        return rows


class _CountingPool:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.counter = [0]

    def acquire(self):
        pool, counter = self._pool, self.counter

        class _Acquire:
            async def __aenter__(self):
                self._cm = pool.acquire()
                return _CountingConnection(await self._cm.__aenter__(), counter)

            async def __aexit__(self, *exc):
                return await self._cm.__aexit__(*exc)

        return _Acquire()


@pytest.fixture
async def counted(pg_dsn: str, hub) -> AsyncIterator[tuple[GraphStore, list[int]]]:
    pool = await asyncpg.create_pool(
        pg_dsn, min_size=1, max_size=2, server_settings={"search_path": "knowledge"}
    )
    try:
        counting = _CountingPool(pool)
        store = KnowledgeStore(counting, load_ontology(), stale_source_days=180)  # type: ignore[arg-type]
        yield GraphStore(store, max_counted_rows=COUNTED), counting.counter
    finally:
        await pool.close()


async def test_hub_reads_fetch_rows_bounded_by_the_page(counted) -> None:
    model, rows = counted
    scope = [uuid.UUID(PROJECT)]
    _, facts, total = await model.get_entity(
        scope, HUB, None, None, None, 10, ConflictFilter.INCLUDE
    )
    assert (len(facts), total) == (10, Total(COUNTED, lower_bound=True))
    assert rows[0] < 100
    rows[0] = 0
    hood = await model.explore(scope, HUB, None, 3, 10, None, None, ConflictFilter.INCLUDE)
    assert hood.truncated and len(hood.edges) == 10
    assert rows[0] < 100
    rows[0] = 0
    groups, total, _ = await model.list_conflicts(scope, 10, "", None, None)
    assert total == Total(1, lower_bound=False) and len(groups) == 1
    assert rows[0] < 100


async def test_a_total_under_the_limit_is_exact(pg_dsn, hub) -> None:
    pool = await asyncpg.create_pool(
        pg_dsn, min_size=1, max_size=1, server_settings={"search_path": "knowledge"}
    )
    try:
        store = KnowledgeStore(pool, load_ontology(), stale_source_days=180)
        model = GraphStore(store, max_counted_rows=HUB_FACTS + 3)
        _, _, total = await model.get_entity(
            [uuid.UUID(PROJECT)], HUB, None, None, None, 10, ConflictFilter.INCLUDE
        )
    finally:
        await pool.close()
    assert total == Total(HUB_FACTS + 3, lower_bound=False)
