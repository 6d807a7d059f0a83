"""The knowledge model through a real gRPC server and PostgreSQL: corrections (bi-temporal),
entities with aliases, sources with versions and freshness, graph traversal, conflicts,
the scoped change feed, communities and the operator's ontology file."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import knowledge_settings, knowledge_stub

from vera.config import ConfigError, KnowledgeSettings, Settings
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.rpc.timestamps import from_timestamp
from vera.services.knowledge.domain import fact_key, load_ontology

CURATOR = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
OTHER_PROJECT = str(uuid.uuid4())


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def source(source_id: str = "adr-7", **kw) -> pb.SourceInput:
    return pb.SourceInput(
        source_id=source_id,
        source_type=kw.pop("source_type", "adr"),
        title=kw.pop("title", f"Title {source_id}"),
        uri=f"https://docs/{source_id}",
        **kw,
    )


def fact(subject: str, predicate: str, object_: str, source_id: str = "adr-7", **kw):
    return pb.FactInput(
        subject=subject,
        predicate=predicate,
        object=object_,
        source_id=source_id,
        evidence=f"{subject} {predicate} {object_}",
        locator="L1-L3",
        **kw,
    )


Stub = knowledge_pb2_grpc.KnowledgeServiceStub


def _settings(pg_dsn: str, **knowledge) -> Settings:
    return knowledge_settings(pg_dsn, knowledge=KnowledgeSettings(**knowledge))


async def ingest(stub: Stub, scope: str = PROJECT, *, sources=(), entities=(), facts=()):
    return await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=scope,
            sources=list(sources) or [source()],
            entities=list(entities),
            facts=list(facts),
        )
    )


def just_before(value) -> datetime:
    return from_timestamp(value, "recorded_at") - timedelta(microseconds=1)


async def entity_objects(stub: Stub, name: str, **kw) -> list[str]:
    response = await stub.GetEntity(pb.GetEntityRequest(scope_ids=[PROJECT], name=name, **kw))
    return sorted(f.object for f in response.facts if f.predicate == "uses_database")


async def test_correction_closes_the_old_version_and_both_answers_stay_readable(stub) -> None:
    await ingest(stub, facts=[fact("payments", "uses_database", "PostgreSQL 15")])
    old_key = fact_key(PROJECT, "payments", "uses_database", "PostgreSQL 15")
    corrected = await stub.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=old_key,
            replacement=fact("payments", "uses_database", "PostgreSQL 16"),
            reason="ADR 7 was misread",
        )
    )
    new_key = corrected.replacement.fact_key
    assert corrected.created
    retried = await stub.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=old_key,
            replacement=fact("payments", "uses_database", "PostgreSQL 16"),
        )
    )
    assert not retried.created
    assert retried.replacement.version_id == corrected.replacement.version_id
    assert corrected.corrected.state == pb.FACT_STATE_SUPERSEDED
    assert corrected.corrected.superseded_by == new_key
    assert corrected.replacement.corrects == old_key
    before = just_before(corrected.replacement)

    assert await entity_objects(stub, "payments") == ["PostgreSQL 16"]
    assert await entity_objects(stub, "payments", known_as_of=ts(before)) == ["PostgreSQL 15"]

    # The old fact's history: ACTIVE then SUPERSEDED; never overwritten.
    now = await stub.GetFact(pb.GetFactRequest(scope_ids=[PROJECT], fact_key=old_key))
    assert now.fact.state == pb.FACT_STATE_SUPERSEDED
    assert [v.state for v in now.versions] == [pb.FACT_STATE_ACTIVE, pb.FACT_STATE_SUPERSEDED]
    assert now.versions[0].HasField("superseded_at")
    then = await stub.GetFact(
        pb.GetFactRequest(scope_ids=[PROJECT], fact_key=old_key, known_as_of=ts(before))
    )
    assert then.fact.state == pb.FACT_STATE_ACTIVE
    assert len(then.versions) == 1 and not then.versions[0].HasField("superseded_at")
    # BatchGetFacts (retrieval's re-read) agrees.
    live = await stub.BatchGetFacts(
        pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=[old_key, new_key])
    )
    assert [f.fact_key for f in live.facts] == [new_key]

    with pytest.raises(InvalidInput) as err:  # a superseded fact is not corrected again
        await stub.CorrectFact(
            pb.CorrectFactRequest(
                principal_id=CURATOR,
                scope_id=PROJECT,
                fact_key=old_key,
                replacement=fact("payments", "uses_database", "MySQL"),
            )
        )
    assert err.value.field == "fact_key"
    assert err.value.metadata["reason"] == "not_active"


async def test_valid_time_correction_keeps_the_past_and_combines_with_known_as_of(stub) -> None:
    await ingest(
        stub,
        facts=[
            fact(
                "payments",
                "uses_database",
                "MySQL",
                valid_from=ts(datetime(2024, 1, 1, tzinfo=UTC)),
            )
        ],
    )
    changed_at = datetime(2025, 6, 1, tzinfo=UTC)
    corrected = await stub.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=fact_key(PROJECT, "payments", "uses_database", "MySQL"),
            replacement=fact("payments", "uses_database", "PostgreSQL", valid_from=ts(changed_at)),
        )
    )
    # The world changed: the old fact stays true before the change.
    assert corrected.corrected.state == pb.FACT_STATE_ACTIVE
    assert from_timestamp(corrected.corrected, "valid_to") == changed_at
    before = just_before(corrected.replacement)
    spring = ts(datetime(2025, 3, 1, tzinfo=UTC))
    assert await entity_objects(stub, "payments", as_of=spring) == ["MySQL"]
    assert await entity_objects(stub, "payments") == ["PostgreSQL"]
    # What we believed before the correction about today: still MySQL.
    assert await entity_objects(stub, "payments", known_as_of=ts(before)) == ["MySQL"]
    assert await entity_objects(stub, "payments", as_of=spring, known_as_of=ts(before)) == ["MySQL"]
    # No conflict: the two validity intervals do not overlap.
    conflicts = await stub.ListConflicts(pb.ListConflictsRequest(scope_ids=[PROJECT]))
    assert conflicts.total == 0


async def test_entities_resolve_aliases_and_ambiguous_names_list_candidates(stub) -> None:
    await ingest(
        stub,
        entities=[pb.EntityInput(name="payments-api", aliases=["Pay"], kind="service")],
        facts=[fact("payments-api", "owned_by", "team-a")],
    )
    await ingest(
        stub,
        OTHER_PROJECT,
        entities=[pb.EntityInput(name="paystation", aliases=["pay"], kind="service")],
    )
    one = await stub.GetEntity(pb.GetEntityRequest(scope_ids=[PROJECT], name="  PAY "))
    assert one.entity.name == "payments-api" and list(one.entity.aliases) == ["Pay"]
    assert [f.object for f in one.facts] == ["team-a"]
    assert one.facts[0].citations[0].source_id == "adr-7"
    by_id = await stub.GetEntity(
        pb.GetEntityRequest(scope_ids=[PROJECT], entity_id=one.entity.entity_id)
    )
    assert by_id.entity.name == "payments-api"

    with pytest.raises(InvalidInput) as err:
        await stub.GetEntity(pb.GetEntityRequest(scope_ids=[PROJECT, OTHER_PROJECT], name="pay"))
    assert err.value.field == "entity"
    assert err.value.metadata["reason"] == "ambiguous"
    candidates = json.loads(err.value.metadata["candidates_json"])
    assert sorted(c["name"] for c in candidates) == ["payments-api", "paystation"]

    with pytest.raises(InvalidInput) as err:
        await stub.GetEntity(pb.GetEntityRequest(scope_ids=[PROJECT], name="nobody"))
    assert err.value.metadata["reason"] == "not_found"
    # A name facts use without a declared entity still resolves.
    team = await stub.GetEntity(pb.GetEntityRequest(scope_ids=[PROJECT], name="team-a"))
    assert team.entity.entity_id == "" and team.total_facts == 1


async def test_sources_keep_artifact_versions_and_report_freshness(stub) -> None:
    old = datetime(2020, 1, 1, tzinfo=UTC)
    await ingest(
        stub, sources=[source("adr-7", observed_at=ts(old))], facts=[fact("a", "uses", "b")]
    )
    detail = await stub.GetSource(pb.GetSourceRequest(scope_ids=[PROJECT], source_id="adr-7"))
    assert detail.freshness.stale and detail.freshness.reason == "source_stale"
    assert detail.cited_by_facts == 1 and len(detail.versions) == 1
    fresh = datetime.now(UTC) - timedelta(days=1)
    await ingest(stub, sources=[source("adr-7", observed_at=ts(fresh), title="ADR 7 v2")])
    detail = await stub.GetSource(pb.GetSourceRequest(scope_ids=[PROJECT], source_id="adr-7"))
    assert [v.version for v in detail.versions] == [2, 1]
    assert detail.source.title == "ADR 7 v2"
    assert not detail.freshness.stale and detail.freshness.age_days <= 1
    with pytest.raises(InvalidInput) as err:
        await stub.GetSource(pb.GetSourceRequest(scope_ids=[OTHER_PROJECT], source_id="adr-7"))
    assert err.value.field == "source_id"


async def test_a_source_is_refreshed_by_its_id_and_a_newer_observed_at_alone(stub) -> None:
    """A curator's refresh line names only the id and the new observation: the source is
    updated in place (what it omits is kept), one artifact version is added, no fact is
    duplicated, and the same line again writes nothing."""
    old = datetime.now(UTC) - timedelta(days=400)
    await ingest(
        stub,
        sources=[source("adr-9", observed_at=ts(old))],
        facts=[fact("a", "uses", "b", "adr-9")],
    )
    key = fact_key(PROJECT, "a", "uses", "b")

    async def citation() -> pb.Citation:
        request = pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=[key])
        got = await stub.BatchGetFacts(request)
        [f] = got.facts
        [c] = f.citations
        return c

    assert (await citation()).stale
    fresh = datetime.now(UTC) - timedelta(days=2)
    refresh = pb.SourceInput(source_id="adr-9", observed_at=ts(fresh))
    first = await ingest(stub, sources=[refresh])
    again = await ingest(stub, sources=[refresh])
    assert (first.sources.created, again.sources.created) == (0, 0)
    detail = await stub.GetSource(pb.GetSourceRequest(scope_ids=[PROJECT], source_id="adr-9"))
    assert [v.version for v in detail.versions] == [2, 1]
    assert (detail.source.title, detail.source.uri, detail.source.source_type) == (
        "Title adr-9", "https://docs/adr-9", "adr")
    assert from_timestamp(detail.source, "observed_at") == fresh
    assert not detail.freshness.stale and detail.cited_by_facts == 1
    assert not (await citation()).stale


async def test_explore_walks_hops_with_provenance_and_bounds(stub) -> None:
    await ingest(
        stub,
        entities=[pb.EntityInput(name="ledger", aliases=["ledger-svc"])],
        facts=[
            fact("checkout", "calls", "payments"),
            fact("payments", "depends_on", "ledger-svc"),
            fact("ledger", "stores_data_in", "postgres"),
        ],
    )
    one = await stub.ExploreGraph(pb.ExploreGraphRequest(scope_ids=[PROJECT], name="checkout"))
    assert [(e.hop, e.from_node, e.to_node) for e in one.edges] == [(1, "checkout", "payments")]
    three = await stub.ExploreGraph(
        pb.ExploreGraphRequest(scope_ids=[PROJECT], name="checkout", depth=3)
    )
    assert [e.hop for e in three.edges] == [1, 2, 3]
    assert three.edges[2].fact.object == "postgres"  # reached through the alias
    assert all(e.fact.citations and e.fact.citations[0].source_id == "adr-7" for e in three.edges)
    capped = await stub.ExploreGraph(
        pb.ExploreGraphRequest(scope_ids=[PROJECT], name="checkout", depth=3, page_size=2)
    )
    assert len(capped.edges) == 2 and capped.truncated
    with pytest.raises(InvalidInput) as err:
        await stub.ExploreGraph(pb.ExploreGraphRequest(scope_ids=[PROJECT], name="x", depth=6))
    assert err.value.field == "depth"


async def test_conflicts_group_disagreeing_single_valued_facts(stub) -> None:
    await ingest(
        stub,
        facts=[
            fact("payments", "uses_database", "postgres"),
            fact("payments", "uses_database", "mysql"),
            fact("payments", "depends_on", "a"),
            fact("payments", "depends_on", "b"),  # multi-valued: no conflict
        ],
    )
    listed = await stub.ListConflicts(pb.ListConflictsRequest(scope_ids=[PROJECT]))
    assert listed.total == 1 and listed.ontology_version == load_ontology().version
    group = listed.conflicts[0]
    assert (group.subject, group.predicate) == ("payments", "uses_database")
    assert sorted(f.object for f in group.facts) == ["mysql", "postgres"]
    assert all(f.state == pb.FACT_STATE_DISPUTED for f in group.facts)
    only = await stub.GetEntity(
        pb.GetEntityRequest(
            scope_ids=[PROJECT], name="payments", conflict_filter=pb.CONFLICT_FILTER_ONLY
        )
    )
    assert only.total_facts == 2
    excluded = await stub.GetEntity(
        pb.GetEntityRequest(
            scope_ids=[PROJECT], name="payments", conflict_filter=pb.CONFLICT_FILTER_EXCLUDE
        )
    )
    assert sorted(f.object for f in excluded.facts) == ["a", "b"]
    other = await stub.ListConflicts(pb.ListConflictsRequest(scope_ids=[OTHER_PROJECT]))
    assert other.total == 0 and not other.conflicts


async def test_operator_ontology_file_decides_single_valued_predicates(
    pg_dsn: str, tmp_path: Path
) -> None:
    path = tmp_path / "ontology.json"
    path.write_text(json.dumps({"version": "ops-2", "single_valued_predicates": ["mascot"]}))
    async with knowledge_stub(_settings(pg_dsn, ontology_path=path)) as stub:
        await ingest(stub, facts=[fact("acme", "mascot", "owl"), fact("acme", "mascot", "fox")])
        listed = await stub.ListConflicts(pb.ListConflictsRequest(scope_ids=[PROJECT]))
        assert listed.total == 1 and listed.ontology_version == "ops-2"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="VERA_KNOWLEDGE__ONTOLOGY_PATH"):
        load_ontology(bad)


async def test_change_feed_is_scoped_cursor_paginated_and_names_corrections(stub) -> None:
    await ingest(stub, facts=[fact("a", "uses_database", "x"), fact("b", "uses", "c")])
    await ingest(stub, OTHER_PROJECT, facts=[fact("secret", "uses", "thing")])
    await stub.CorrectFact(
        pb.CorrectFactRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            fact_key=fact_key(PROJECT, "a", "uses_database", "x"),
            replacement=fact("a", "uses_database", "y"),
        )
    )
    seen: list[pb.ScopeChange] = []
    token = ""
    while True:
        page = await stub.ListScopeChanges(
            pb.ListScopeChangesRequest(scope_ids=[PROJECT], page_size=2, page_token=token)
        )
        seen.extend(page.changes)
        token = page.next_page_token
        if not page.has_more:
            break
    assert all(c.scope_id == PROJECT for c in seen)
    kinds = [c.change for c in seen]
    assert kinds[0] == "source_updated" and kinds.count("published") == 2
    assert kinds[-2:] == ["corrected", "correction"]
    assert [c.position for c in seen] == sorted(c.position for c in seen)
    # Polling from the returned cursor: nothing new is an answer, not an error.
    empty = await stub.ListScopeChanges(
        pb.ListScopeChangesRequest(scope_ids=[PROJECT], page_token=token)
    )
    assert not empty.changes and not empty.has_more and empty.next_page_token == token


async def test_communities_are_derived_clustered_searchable_and_traceable(stub) -> None:
    nothing = await stub.SearchCommunities(
        pb.SearchCommunitiesRequest(scope_ids=[PROJECT], query="payments")
    )
    assert nothing.empty_reason == "no_communities_derived"
    await ingest(
        stub,
        facts=[
            fact("payments", "depends_on", "ledger"),
            fact("ledger", "stores_data_in", "postgres"),
            fact("payments", "calls", "postgres"),
            fact("search", "depends_on", "elastic"),
            fact("elastic", "runs_on", "k8s"),
            fact("search", "calls", "k8s"),
        ],
    )
    derived = await stub.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))
    assert derived.run.algorithm == "louvain" and derived.community_count == 2
    assert derived.run.summarizer == "extractive-v1" and derived.run.fact_count == 6
    again = await stub.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))
    assert not again.created and again.run.run_id == derived.run.run_id

    found = await stub.SearchCommunities(
        pb.SearchCommunitiesRequest(scope_ids=[PROJECT], query="what does ledger use?")
    )
    top = found.communities[0]
    assert sorted(top.entities) == ["ledger", "payments", "postgres"]
    assert top.authoritative is False and "Extractive" in top.summary
    assert top.run.run_id == derived.run.run_id and top.fact_count == 3

    page1 = await stub.GetCommunityLineage(
        pb.GetCommunityLineageRequest(
            scope_ids=[PROJECT], community_id=top.community_id, page_size=2
        )
    )
    page2 = await stub.GetCommunityLineage(
        pb.GetCommunityLineageRequest(
            scope_ids=[PROJECT],
            community_id=top.community_id,
            page_size=2,
            page_token=page1.next_page_token,
        )
    )
    assert page1.total == 3 and len(page1.facts) == 2 and len(page2.facts) == 1
    assert not page2.next_page_token
    lineage = {f.subject for f in [*page1.facts, *page2.facts]}
    assert lineage == {"payments", "ledger"}
    with pytest.raises(InvalidInput) as err:  # out of scope reads as missing
        await stub.GetCommunityLineage(
            pb.GetCommunityLineageRequest(scope_ids=[OTHER_PROJECT], community_id=top.community_id)
        )
    assert err.value.field == "community_id"
    missing = await stub.SearchCommunities(
        pb.SearchCommunitiesRequest(scope_ids=[PROJECT], query="zebra")
    )
    assert not missing.communities and missing.empty_reason == "no_matching_communities"
    # A later write moves the change log: the next derivation is a new run.
    await ingest(stub, facts=[fact("payments", "owned_by", "team-a")])
    newer = await stub.DeriveCommunities(pb.DeriveCommunitiesRequest(scope_id=PROJECT))
    assert newer.created and newer.run.run_id != derived.run.run_id
    assert uuid.UUID(newer.run.run_id)


async def test_a_validity_only_correction_keeps_the_key_and_is_idempotent(stub) -> None:
    await ingest(stub, facts=[fact("payments", "owned_by", "team-a")])
    key = fact_key(PROJECT, "payments", "owned_by", "team-a")
    ended = datetime(2025, 1, 1, tzinfo=UTC)
    request = pb.CorrectFactRequest(
        principal_id=CURATOR,
        scope_id=PROJECT,
        fact_key=key,
        replacement=fact("payments", "owned_by", "team-a", valid_to=ts(ended)),
    )
    first = await stub.CorrectFact(request)
    assert first.created and first.replacement.fact_key == key
    assert first.replacement.corrects == key
    again = await stub.CorrectFact(request)
    assert not again.created and again.replacement.version_id == first.replacement.version_id
    history = await stub.GetFact(
        pb.GetFactRequest(
            scope_ids=[PROJECT], fact_key=key, as_of=ts(datetime(2024, 6, 1, tzinfo=UTC))
        )
    )
    assert len(history.versions) == 2
    assert from_timestamp(history.fact, "valid_to") == ended


async def test_citations_carry_the_one_staleness_rule(pg_dsn: str) -> None:
    """Knowledge marks each citation it returns; a source never observed is not stale."""
    names = ("old", "recent", "unobserved")
    async with knowledge_stub(_settings(pg_dsn, stale_source_days=30)) as stub:
        await ingest(
            stub,
            sources=[
                source("old", observed_at=ts(datetime.now(UTC) - timedelta(days=31))),
                source("recent", observed_at=ts(datetime.now(UTC) - timedelta(days=29))),
                source("unobserved"),
            ],
            facts=[fact("svc", "uses", name, source_id=name) for name in names],
        )
        keys = [fact_key(PROJECT, "svc", "uses", name) for name in names]
        got = await stub.BatchGetFacts(pb.BatchGetFactsRequest(scope_ids=[PROJECT], fact_keys=keys))
        assert [[c.stale for c in f.citations] for f in got.facts] == [[True], [False], [False]]
        never = await stub.GetSource(
            pb.GetSourceRequest(scope_ids=[PROJECT], source_id="unobserved")
        )
        assert not never.freshness.stale
