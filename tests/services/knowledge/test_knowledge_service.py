"""KnowledgeService through a real gRPC server against a real PostgreSQL database."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from vera.config import ConfigError, DatabaseSettings, Settings
from vera.errors import InvalidInput
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.services.knowledge import server as knowledge_server
from vera.services.knowledge.domain import fact_key

CURATOR = str(uuid.uuid4())
AGENT = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
OTHER_PROJECT = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())


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
        evidence=kw.pop("evidence", f"{subject} {predicate} {object_}"),
        locator=kw.pop("locator", "L1-L3"),
        **kw,
    )


def ingest_request(scope: str = PROJECT, *, sources=(), entities=(), facts=()):
    return pb.IngestKnowledgeRequest(
        principal_id=CURATOR,
        scope_id=scope,
        sources=list(sources),
        entities=list(entities),
        facts=list(facts),
    )


async def head(stub) -> int:
    return (await stub.ListChanges(pb.ListChangesRequest(page_size=1))).head_position


def task(**kw) -> pb.TaskContext:
    kw.setdefault("runtime", "claude-code")
    kw.setdefault("session_ref", "sess-1")
    return pb.TaskContext(**kw)


async def propose(stub, subject, predicate, object_, *, readable=(PROJECT,), **ctx):
    return await stub.ProposeFact(
        pb.ProposeFactRequest(
            principal_id=AGENT,
            personal_scope_id=PERSONAL,
            readable_scope_ids=list(readable),
            subject=subject,
            predicate=predicate,
            object=object_,
            evidence_text=f"seen in {subject}",
            context=task(**ctx),
        )
    )


async def get(stub, keys, scopes=(PROJECT,), **kw) -> list[pb.Fact]:
    response = await stub.BatchGetFacts(
        pb.BatchGetFactsRequest(scope_ids=list(scopes), fact_keys=list(keys), **kw)
    )
    return list(response.facts)


async def test_create_requires_a_dsn() -> None:
    with pytest.raises(ConfigError, match="VERA_DATABASE__DSN"):
        await knowledge_server.create(Settings(database=DatabaseSettings()), "127.0.0.1:0")


async def test_ingest_counts_and_idempotent_reingest(stub) -> None:
    request = ingest_request(
        sources=[source("adr-7"), source("runbook-1", source_type="runbook")],
        entities=[
            pb.EntityInput(name="Payments", aliases=["payments-svc"], kind="service"),
            pb.EntityInput(name="payments", kind="service"),  # same entity, other casing
        ],
        facts=[
            fact("payments", "owned_by", "team-a"),
            fact("Payments", "OWNED_BY", "team-a", source_id="runbook-1"),  # same fact
            fact("payments", "depends_on", "ledger", trust_tier=0, authority=0.9),
        ],
    )
    first = await stub.IngestKnowledge(request)
    assert (first.sources.created, first.sources.deduplicated) == (2, 0)
    assert (first.entities.created, first.entities.deduplicated) == (1, 1)
    assert (first.facts.created, first.facts.deduplicated) == (2, 1)
    assert first.change_position > 0
    assert first.change_position == await head(stub)

    again = await stub.IngestKnowledge(request)
    assert (again.sources.created, again.facts.created, again.entities.created) == (0, 0, 0)
    assert (again.sources.deduplicated, again.facts.deduplicated) == (2, 3)
    assert again.change_position == first.change_position

    key = fact_key(PROJECT, "payments", "owned_by", "team-a")
    [owned] = await get(stub, [key])
    assert owned.state == pb.FACT_STATE_ACTIVE
    assert (owned.trust_tier, owned.authority, owned.source_type) == (1, pytest.approx(0.7), "adr")
    assert sorted(c.source_id for c in owned.citations) == ["adr-7", "runbook-1"]
    assert all(c.verification == pb.VERIFICATION_STATE_VERIFIED for c in owned.citations)
    by_source = {c.source_id: c for c in owned.citations}
    assert by_source["adr-7"].excerpt == "payments owned_by team-a"
    assert by_source["runbook-1"].locator == "L1-L3"
    assert by_source["runbook-1"].title == "Title runbook-1"
    assert by_source["runbook-1"].source_type == "runbook"
    [dep] = await get(stub, [fact_key(PROJECT, "payments", "depends_on", "ledger")])
    assert (dep.trust_tier, dep.authority) == (0, pytest.approx(0.9))


async def test_ingest_adds_new_source_to_known_fact_and_updates_sources(stub) -> None:
    await stub.IngestKnowledge(
        ingest_request(sources=[source("adr-7")], facts=[fact("api", "uses_database", "pg")])
    )
    before = await head(stub)
    later = await stub.IngestKnowledge(
        ingest_request(
            sources=[source("adr-9", title="Renamed")],
            facts=[
                # adr-7 is already in the scope, so it may be named without being sent.
                fact("api", "uses_database", "pg", source_id="adr-9", evidence="x" * 900),
                fact("api", "deploys_to", "k8s", source_id="adr-7"),
            ],
        )
    )
    assert (later.facts.created, later.facts.deduplicated) == (1, 1)
    assert later.change_position > before
    [api] = await get(stub, [fact_key(PROJECT, "api", "uses_database", "pg")])
    assert {c.source_id for c in api.citations} == {"adr-7", "adr-9"}
    assert max(len(c.excerpt) for c in api.citations) == 500

    renamed = await stub.IngestKnowledge(
        ingest_request(sources=[source("adr-9", title="Renamed again")])
    )
    assert (renamed.sources.created, renamed.sources.deduplicated) == (0, 1)
    assert renamed.change_position == later.change_position + 1
    page = await stub.ListChanges(pb.ListChangesRequest(after_position=later.change_position))
    assert [c.kind for c in page.changes] == [pb.CHANGE_KIND_SOURCE_UPSERTED]


async def test_ingest_validates_the_whole_batch_and_writes_nothing(stub, pg_dsn) -> None:
    good = fact("payments", "owned_by", "team-a")
    cases = {
        "facts[1].trust_tier": [good, fact("a", "b", "c", trust_tier=7)],
        "facts[1].authority": [good, fact("a", "b", "c", authority=1.5)],
        "facts[1].object": [good, fact("a", "b", "")],
        "facts[1].valid_to": [
            good,
            fact(
                "a",
                "b",
                "c",
                valid_from=ts(datetime(2024, 2, 1, tzinfo=UTC)),
                valid_to=ts(datetime(2024, 1, 1, tzinfo=UTC)),
            ),
        ],
        "facts[1].source_id": [good, fact("a", "b", "c", source_id="nowhere")],
    }
    for field_name, facts in cases.items():
        with pytest.raises(InvalidInput) as err:
            await stub.IngestKnowledge(ingest_request(sources=[source()], facts=facts))
        assert err.value.field == field_name
    with pytest.raises(InvalidInput) as err:
        await stub.IngestKnowledge(
            pb.IngestKnowledgeRequest(principal_id=CURATOR, scope_id="not-a-uuid")
        )
    assert err.value.field == "scope_id"

    assert await head(stub) == 0
    conn = await asyncpg.connect(pg_dsn)
    try:
        for table in ("sources", "facts", "assertions", "evidence", "outbox"):
            assert await conn.fetchval(f"SELECT count(*) FROM knowledge.{table}") == 0
    finally:
        await conn.close()


async def test_batch_get_filters_scope_and_keeps_request_order(stub) -> None:
    await stub.IngestKnowledge(
        ingest_request(sources=[source()], facts=[fact("a", "rel", "1"), fact("b", "rel", "2")])
    )
    await stub.IngestKnowledge(
        ingest_request(OTHER_PROJECT, sources=[source()], facts=[fact("c", "rel", "3")])
    )
    a, b = fact_key(PROJECT, "a", "rel", "1"), fact_key(PROJECT, "b", "rel", "2")
    c = fact_key(OTHER_PROJECT, "c", "rel", "3")
    facts = await get(stub, [b, c, "fk_missing", a])
    assert [f.fact_key for f in facts] == [b, a]
    assert {f.scope_id for f in facts} == {PROJECT}
    both = await get(stub, [c, a], scopes=[PROJECT, OTHER_PROJECT])
    assert [f.fact_key for f in both] == [c, a]
    assert await get(stub, [a], scopes=[]) == []

    explained = await stub.ExplainFact(pb.ExplainFactRequest(scope_ids=[PROJECT], fact_key=a))
    assert explained.fact.fact_key == a
    [assertion] = explained.assertions
    assert assertion.source.source_id == "adr-7" and assertion.supports
    assert assertion.verification == pb.VERIFICATION_STATE_VERIFIED
    assert [e.text for e in assertion.evidence] == ["a rel 1"]
    for scopes, key in (([PROJECT], c), ([PROJECT], "fk_missing")):
        with pytest.raises(InvalidInput) as err:
            await stub.ExplainFact(pb.ExplainFactRequest(scope_ids=scopes, fact_key=key))
        assert (err.value.field, err.value.metadata.get("reason")) == ("fact_key", "not_found")


async def test_as_of_filters_valid_time(stub) -> None:
    jan, feb, mar = (datetime(2024, m, 1, tzinfo=UTC) for m in (1, 2, 3))
    await stub.IngestKnowledge(
        ingest_request(
            sources=[source()],
            facts=[
                fact("svc", "version", "1", valid_from=ts(jan), valid_to=ts(feb)),
                fact("svc", "version", "2", valid_from=ts(feb)),
            ],
        )
    )
    v1, v2 = fact_key(PROJECT, "svc", "version", "1"), fact_key(PROJECT, "svc", "version", "2")
    assert [f.fact_key for f in await get(stub, [v1, v2])] == [v2]
    mid_jan = jan + timedelta(days=14)
    assert [f.fact_key for f in await get(stub, [v1, v2], as_of=ts(mid_jan))] == [v1]
    assert await get(stub, [v1, v2], as_of=ts(jan - timedelta(days=1))) == []
    [current] = await get(stub, [v2], as_of=ts(mar))
    # Non-overlapping intervals on a single-valued predicate are history, not a conflict.
    assert current.state == pb.FACT_STATE_ACTIVE and not current.conflicting_fact_keys
    assert current.valid_from.ToDatetime(tzinfo=UTC) == feb
    assert not current.HasField("valid_to") and not current.HasField("superseded_at")


async def test_single_valued_conflict_reads_as_disputed(stub) -> None:
    await stub.IngestKnowledge(
        ingest_request(
            sources=[source()],
            facts=[
                fact("payments", "owned_by", "team-a"),
                fact("payments", "owned_by", "team-b"),
                fact("payments", "depends_on", "ledger"),
                fact("payments", "depends_on", "queue"),
            ],
        )
    )
    a = fact_key(PROJECT, "payments", "owned_by", "team-a")
    b = fact_key(PROJECT, "payments", "owned_by", "team-b")
    deps = [fact_key(PROJECT, "payments", "depends_on", o) for o in ("ledger", "queue")]
    fa, fb, *multi = await get(stub, [a, b, *deps])
    assert fa.state == fb.state == pb.FACT_STATE_DISPUTED
    assert list(fa.conflicting_fact_keys) == [b] and list(fb.conflicting_fact_keys) == [a]
    assert all(f.state == pb.FACT_STATE_ACTIVE and not f.conflicting_fact_keys for f in multi)


async def test_propose_outcomes_and_attempts(stub) -> None:
    await stub.IngestKnowledge(
        ingest_request(
            sources=[source()],
            facts=[fact("payments", "owned_by", "team-a"), fact("payments", "uses", "kafka")],
        )
    )
    created = await propose(stub, "payments", "depends_on", "ledger")
    assert created.outcome == pb.PROPOSAL_OUTCOME_CREATED and not created.reason
    key = fact_key(PERSONAL, "payments", "depends_on", "ledger")
    assert created.fact.fact_key == key and created.fact.scope_id == PERSONAL
    assert created.fact.state == pb.FACT_STATE_PROPOSED
    assert (created.fact.trust_tier, created.fact.authority) == (4, pytest.approx(0.1))
    [citation] = created.fact.citations
    assert citation.verification == pb.VERIFICATION_STATE_UNVERIFIED and not citation.source_id
    assert citation.excerpt == "seen in payments"

    dedup = await propose(stub, " Payments ", "DEPENDS_ON", "ledger")
    assert dedup.outcome == pb.PROPOSAL_OUTCOME_DEDUPLICATED
    assert dedup.fact.version_id == created.fact.version_id

    skipped = await propose(stub, "payments", "uses", "Kafka")
    assert (skipped.outcome, skipped.reason) == (pb.PROPOSAL_OUTCOME_SKIPPED, "already_known")
    assert skipped.fact.fact_key == fact_key(PROJECT, "payments", "uses", "kafka")

    conflicted = await propose(stub, "payments", "owned_by", "team-z")
    assert conflicted.outcome == pb.PROPOSAL_OUTCOME_CONFLICTED
    assert conflicted.reason == "single_valued_conflict"
    assert list(conflicted.conflicting_fact_keys) == [
        fact_key(PROJECT, "payments", "owned_by", "team-a")
    ]
    assert not conflicted.HasField("fact")
    assert (
        await get(stub, [fact_key(PERSONAL, "payments", "owned_by", "team-z")], scopes=[PERSONAL])
        == []
    )

    # Without the project readable, nothing is known or contradicted.
    alone = await propose(stub, "payments", "owned_by", "team-z", readable=())
    assert alone.outcome == pb.PROPOSAL_OUTCOME_CREATED

    report = await stub.GetProposalReport(
        pb.GetProposalReportRequest(principal_id=AGENT, context=task())
    )
    assert report.total_attempts == 5
    assert [a.outcome for a in report.attempts] == [
        pb.PROPOSAL_OUTCOME_CREATED,
        pb.PROPOSAL_OUTCOME_DEDUPLICATED,
        pb.PROPOSAL_OUTCOME_SKIPPED,
        pb.PROPOSAL_OUTCOME_CONFLICTED,
        pb.PROPOSAL_OUTCOME_CREATED,
    ]
    assert report.attempts[0].attempt_id == created.attempt_id
    assert report.attempts[0].fact_state == pb.FACT_STATE_PROPOSED
    assert report.attempts[2].fact_state == pb.FACT_STATE_ACTIVE
    assert report.attempts[0].context.runtime == "claude-code"
    assert dict(report.outcome_counts) == {
        "created": 2,
        "deduplicated": 1,
        "skipped": 1,
        "conflicted": 1,
        "rejected": 0,
    }
    assert dict(report.state_counts) == {"proposed": 2, "active": 1}


async def test_propose_rejects_past_the_task_limit(stub) -> None:
    for i in range(50):
        assert (await propose(stub, f"s{i}", "depends_on", "o", task_ref="t-1")).outcome == (
            pb.PROPOSAL_OUTCOME_CREATED
        )
    rejected = await propose(stub, "s50", "depends_on", "o", task_ref="t-1")
    assert (rejected.outcome, rejected.reason) == (pb.PROPOSAL_OUTCOME_REJECTED, "task_limit")
    # A retry of an existing proposal still deduplicates; another task is unaffected.
    assert (await propose(stub, "s0", "depends_on", "o", task_ref="t-1")).outcome == (
        pb.PROPOSAL_OUTCOME_DEDUPLICATED
    )
    assert (await propose(stub, "s50", "depends_on", "o", task_ref="t-2")).outcome == (
        pb.PROPOSAL_OUTCOME_CREATED
    )


async def test_retract_and_known_as_of(stub) -> None:
    created = await propose(stub, "api", "uses", "redis")
    key = created.fact.fact_key
    proposed_at = created.fact.recorded_at

    retract = pb.RetractProposalRequest(
        principal_id=AGENT, personal_scope_id=PERSONAL, fact_key=key
    )
    first = await stub.RetractProposal(retract)
    assert first.status == pb.RETRACTION_STATUS_RETRACTED
    assert first.fact.state == pb.FACT_STATE_RETRACTED and not first.fact.citations
    position = await head(stub)
    again = await stub.RetractProposal(retract)
    assert again.status == pb.RETRACTION_STATUS_ALREADY_RETRACTED
    assert await head(stub) == position

    assert await get(stub, [key], scopes=[PERSONAL]) == []
    [then] = await get(stub, [key], scopes=[PERSONAL], known_as_of=proposed_at)
    assert then.state == pb.FACT_STATE_PROPOSED
    assert then.version_id == created.fact.version_id
    assert [c.verification for c in then.citations] == [pb.VERIFICATION_STATE_UNVERIFIED]
    before = Timestamp()
    before.FromDatetime(proposed_at.ToDatetime(tzinfo=UTC) - timedelta(seconds=1))
    assert await get(stub, [key], scopes=[PERSONAL], known_as_of=before) == []

    explained = await stub.ExplainFact(pb.ExplainFactRequest(scope_ids=[PERSONAL], fact_key=key))
    assert explained.fact.state == pb.FACT_STATE_RETRACTED
    assert [a.verification for a in explained.assertions] == [pb.VERIFICATION_STATE_WITHDRAWN]

    for bad in (
        pb.RetractProposalRequest(principal_id=AGENT, personal_scope_id=PROJECT, fact_key=key),
        pb.RetractProposalRequest(principal_id=AGENT, personal_scope_id=PERSONAL, fact_key="fk_x"),
    ):
        with pytest.raises(InvalidInput) as err:
            await stub.RetractProposal(bad)
        assert (err.value.field, err.value.metadata.get("reason")) == ("fact_key", "not_found")

    # Proposing it again opens a new PROPOSED version; a curator publishing it makes it
    # ACTIVE, after which it is no longer a pending proposal.
    renewed = await propose(stub, "api", "uses", "redis")
    assert renewed.outcome == pb.PROPOSAL_OUTCOME_CREATED
    assert renewed.fact.version_id not in (created.fact.version_id, first.fact.version_id)
    published = await stub.IngestKnowledge(
        ingest_request(PERSONAL, sources=[source()], facts=[fact("api", "uses", "redis")])
    )
    assert published.facts.created == 1
    [active] = await get(stub, [key], scopes=[PERSONAL])
    assert active.state == pb.FACT_STATE_ACTIVE and active.trust_tier == 1
    with pytest.raises(InvalidInput) as err:
        await stub.RetractProposal(retract)
    assert (err.value.field, err.value.metadata.get("reason")) == ("fact_key", "not_pending")
    assert (await propose(stub, "api", "uses", "redis")).outcome == pb.PROPOSAL_OUTCOME_SKIPPED


async def test_report_filters_pages_and_counts(stub) -> None:
    for i in range(5):
        await propose(stub, f"s{i}", "depends_on", "o", task_ref="t-1")
    await propose(stub, "s0", "depends_on", "o", task_ref="t-1")  # deduplicated
    for i in range(3):
        await propose(stub, f"x{i}", "depends_on", "o", task_ref="t-2", session_ref="sess-2")
    retracted = await propose(stub, "s4", "depends_on", "o", task_ref="t-1")
    await stub.RetractProposal(
        pb.RetractProposalRequest(
            principal_id=AGENT, personal_scope_id=PERSONAL, fact_key=retracted.fact.fact_key
        )
    )

    def request(**kw):
        return pb.GetProposalReportRequest(principal_id=AGENT, **kw)

    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await stub.GetProposalReport(
            request(context=pb.TaskContext(task_ref="t-1"), page_size=2, page_token=token)
        )
        pages += 1
        assert page.total_attempts == 7
        assert dict(page.outcome_counts)["created"] == 5
        assert dict(page.outcome_counts)["deduplicated"] == 2
        assert dict(page.state_counts) == {"proposed": 4, "retracted": 1}
        seen.extend(a.attempt_id for a in page.attempts)
        token = page.next_page_token
        if not token:
            break
    assert pages == 4 and len(seen) == len(set(seen)) == 7

    broad = await stub.GetProposalReport(request(context=pb.TaskContext(runtime="CLAUDE-CODE")))
    assert broad.total_attempts == 10
    narrow = await stub.GetProposalReport(
        request(context=pb.TaskContext(session_ref="sess-2", task_ref="t-2"))
    )
    assert narrow.total_attempts == 3
    nobody = await stub.GetProposalReport(
        pb.GetProposalReportRequest(principal_id=str(uuid.uuid4()), context=task())
    )
    assert nobody.total_attempts == 0 and not nobody.attempts

    for bad, field_name in (
        (request(), "context"),
        (request(context=task(), page_size=101), "page_size"),
        (request(context=task(), page_token="garbage!"), "page_token"),
    ):
        with pytest.raises(InvalidInput) as err:
            await stub.GetProposalReport(bad)
        assert err.value.field == field_name


async def test_feedback_is_recorded_once(stub) -> None:
    def request(signal: str) -> pb.RecordFeedbackRequest:
        return pb.RecordFeedbackRequest(
            principal_id=AGENT,
            personal_scope_id=PERSONAL,
            pack_id="pack-1",
            result_ref="r-1",
            signal=signal,
            query="who owns payments",
            rank=2,
            signal_vector={"dense": 0.8, "lexical": 0.4},
            fact_key="fk_abc",
        )

    first = await stub.RecordFeedback(request("up"))
    assert first.created and first.signal == "up"
    position = await head(stub)
    retry = await stub.RecordFeedback(request("down"))
    assert not retry.created and retry.signal == "up"
    assert retry.feedback_id == first.feedback_id and retry.recorded_at == first.recorded_at
    assert await head(stub) == position
    with pytest.raises(InvalidInput) as err:
        await stub.RecordFeedback(request("meh"))
    assert err.value.field == "signal"
    page = await stub.ListChanges(pb.ListChangesRequest())
    assert [c.kind for c in page.changes] == [pb.CHANGE_KIND_FEEDBACK_RECORDED]
    assert not page.changes[0].HasField("fact")


async def test_list_changes_orders_and_pages(stub) -> None:
    first = await stub.IngestKnowledge(
        ingest_request(sources=[source()], facts=[fact(f"s{i}", "rel", "o") for i in range(3)])
    )
    created = await propose(stub, "p", "depends_on", "o")
    await stub.RetractProposal(
        pb.RetractProposalRequest(
            principal_id=AGENT, personal_scope_id=PERSONAL, fact_key=created.fact.fact_key
        )
    )
    everything = await stub.ListChanges(pb.ListChangesRequest())
    positions = [c.position for c in everything.changes]
    assert positions == sorted(positions) and len(positions) == 6
    assert everything.head_position == positions[-1]
    assert positions[3] == first.change_position
    kinds = [c.kind for c in everything.changes]
    assert kinds == [pb.CHANGE_KIND_SOURCE_UPSERTED] + [pb.CHANGE_KIND_FACT_UPSERTED] * 5
    ingested = everything.changes[1].fact
    assert ingested.citations[0].excerpt == "s0 rel o" and ingested.state == pb.FACT_STATE_ACTIVE
    proposed, retracted = everything.changes[4].fact, everything.changes[5].fact
    assert proposed.version_id == created.fact.version_id
    assert proposed.state == pb.FACT_STATE_PROPOSED and proposed.HasField("superseded_at")
    assert retracted.state == pb.FACT_STATE_RETRACTED

    paged: list[int] = []
    after = 0
    while True:
        page = await stub.ListChanges(pb.ListChangesRequest(after_position=after, page_size=4))
        if not page.changes:
            break
        paged.extend(c.position for c in page.changes)
        after = page.changes[-1].position
    assert paged == positions
    for bad, field_name in (
        (pb.ListChangesRequest(page_size=1001), "page_size"),
        (pb.ListChangesRequest(after_position=-1), "after_position"),
    ):
        with pytest.raises(InvalidInput) as err:
            await stub.ListChanges(bad)
        assert err.value.field == field_name


async def test_concurrent_proposals_create_one_fact(stub) -> None:
    results = await asyncio.gather(*(propose(stub, "cache", "uses", "redis") for _ in range(6)))
    outcomes = sorted(r.outcome for r in results)
    assert outcomes == [pb.PROPOSAL_OUTCOME_CREATED] + [pb.PROPOSAL_OUTCOME_DEDUPLICATED] * 5
    assert len({r.fact.version_id for r in results}) == 1
    page = await stub.ListChanges(pb.ListChangesRequest())
    assert len(page.changes) == 1
