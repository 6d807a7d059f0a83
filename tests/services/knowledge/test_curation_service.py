"""Curation RPCs and the proposal policy through a real gRPC server and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import knowledge_settings, knowledge_stub

from vera.config import KnowledgeSettings
from vera.errors import InvalidInput, Unauthorized
from vera.knowledge.v1 import knowledge_service_pb2 as pb

CURATOR = str(uuid.uuid4())
AGENT = str(uuid.uuid4())
PROJECT = str(uuid.uuid4())
OTHER = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())
AWS = "AKIA" + "IOSFODNN7EXAMPLE"


@pytest.fixture
async def db(pg_dsn: str, stub) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(pg_dsn, server_settings={"search_path": "knowledge"})
    try:
        yield conn
    finally:
        await conn.close()


async def propose(stub, subject="payments-api", predicate="depends_on", object_="ledger",
                  *, readable=(PROJECT,), evidence="seen in handler.py", task_ref="t-1",
                  branch="", code_path=""):
    return await stub.ProposeFact(
        pb.ProposeFactRequest(
            principal_id=AGENT,
            personal_scope_id=PERSONAL,
            readable_scope_ids=[PERSONAL, *readable],
            # Addressed to the project its task is bound to (here: the first it reads).
            target_scope_id=readable[0] if readable else "",
            subject=subject,
            predicate=predicate,
            object=object_,
            evidence_text=evidence,
            context=pb.TaskContext(runtime="claude-code", task_ref=task_ref),
            branch=branch,
            code_path=code_path,
        )
    )


async def pending(stub, scope=PROJECT, **kw) -> pb.ListPendingProposalsResponse:
    return await stub.ListPendingProposals(pb.ListPendingProposalsRequest(scope_id=scope, **kw))


async def ingest(stub, facts, sources=("adr-7",)):
    return await stub.IngestKnowledge(
        pb.IngestKnowledgeRequest(
            principal_id=CURATOR,
            scope_id=PROJECT,
            sources=[pb.SourceInput(source_id=s, source_type="adr", title=s) for s in sources],
            facts=[
                pb.FactInput(subject=s, predicate=p, object=o, source_id=src, evidence="e")
                for s, p, o, src in facts
            ],
        )
    )


async def head(stub) -> int:
    return (await stub.ListChanges(pb.ListChangesRequest(page_size=1))).head_position


async def test_pending_proposals_are_listed_per_addressed_project_and_paged(stub) -> None:
    first = await propose(stub, "a", object_="x")
    await propose(stub, "b", object_="y")
    await propose(stub, "c", object_="z", readable=(OTHER,))
    await propose(stub, "d", object_="w", readable=())  # reads no shared project
    page = await pending(stub, page_size=1)
    assert page.total == 2 and len(page.proposals) == 1 and page.next_page_token
    top = page.proposals[0]
    assert top.fact_key == first.fact.fact_key and top.proposer_principal_id == AGENT
    assert list(top.evidence) == ["seen in handler.py"]
    assert top.context.task_ref == "t-1" and top.context.runtime == "claude-code"
    rest = await pending(stub, page_size=1, page_token=page.next_page_token)
    assert [p.subject for p in rest.proposals] == ["b"] and not rest.next_page_token
    assert [p.subject for p in (await pending(stub, OTHER)).proposals] == ["c"]
    with pytest.raises(InvalidInput) as err:
        await pending(stub, page_size=101)
    assert err.value.field == "page_size"


async def test_reviewers_see_where_the_proposer_was_working(stub, db) -> None:
    await propose(stub, "a", branch="feature/ledger", code_path="./services\\ledger//api.py")
    await propose(stub, "b", branch="main", code_path="/home/alice/src/ledger/api.py")
    first, second = (await pending(stub)).proposals
    assert (first.branch, first.code_path) == ("feature/ledger", "services/ledger/api.py")
    # A local path names the proposer's machine: it is not stored, the branch is.
    assert (second.branch, second.code_path) == ("main", "")
    assert await db.fetchval("SELECT count(*) FROM proposal_attempts"
                             " WHERE code_path LIKE '%alice%'") == 0
    # Not part of the task identity: the same fact from another branch deduplicates.
    again = await propose(stub, "a", branch="other")
    assert again.outcome == pb.PROPOSAL_OUTCOME_DEDUPLICATED
    for kwargs, field in (({"branch": "b" * 513}, "branch"),
                          ({"code_path": "p/" * 513}, "code_path"),
                          ({"branch": f"fix-{AWS}"}, "branch")):
        with pytest.raises(InvalidInput) as err:
            await propose(stub, "c", **kwargs)
        assert err.value.field == field
    # The refused attempt keeps no trace of the refused branch.
    assert await db.fetchval(
        "SELECT count(*) FROM proposal_attempts WHERE branch LIKE '%AKIA%'") == 0


async def test_conflicted_attempts_carry_the_proposers_branch_and_path(stub) -> None:
    await ingest(stub, [("payments-api", "uses_database", "PostgreSQL 14", "adr-7")])
    refused = await propose(stub, "payments-api", "uses_database", "PostgreSQL 16",
                            branch="db-upgrade", code_path="deploy/db.yaml")
    assert refused.outcome == pb.PROPOSAL_OUTCOME_CONFLICTED
    [attempt] = (await stub.ListConflictedAttempts(
        pb.ListConflictedAttemptsRequest(scope_id=PROJECT))).attempts
    assert (attempt.branch, attempt.code_path) == ("db-upgrade", "deploy/db.yaml")


async def test_each_change_names_the_principal_whose_action_wrote_it(stub) -> None:
    key = (await propose(stub)).fact.fact_key
    await ingest(stub, [("payments-api", "owned_by", "team-a", "adr-7")])
    await stub.VerifyProposal(pb.VerifyProposalRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key))
    feed = await stub.ListScopeChanges(pb.ListScopeChangesRequest(
        scope_ids=[PROJECT, PERSONAL], page_size=50))
    by_change = [(c.change, c.scope_id, c.actor_principal_id) for c in feed.changes]
    assert ("proposed", PERSONAL, AGENT) in by_change
    assert ("source_updated", PROJECT, CURATOR) in by_change
    published = [actor for change, scope, actor in by_change
                 if change == "published" and scope == PROJECT]
    assert published and set(published) == {CURATOR}


async def test_a_proposal_is_addressed_only_to_its_target(stub) -> None:
    """Reading two shared projects does not address a proposal to both: only the target."""
    async def propose_to(subject: str, target: str):
        return await stub.ProposeFact(pb.ProposeFactRequest(
            principal_id=AGENT, personal_scope_id=PERSONAL,
            readable_scope_ids=[PERSONAL, PROJECT, OTHER], target_scope_id=target,
            subject=subject, predicate="depends_on", object="ledger",
            context=pb.TaskContext(task_ref="t-target")))

    await propose_to("addressed", PROJECT)
    await propose_to("unaddressed", "")
    assert [p.subject for p in (await pending(stub)).proposals] == ["addressed"]
    assert (await pending(stub, OTHER)).proposals == []
    for target in (str(uuid.uuid4()), PERSONAL):
        with pytest.raises(InvalidInput) as err:
            await propose_to("elsewhere", target)
        assert (err.value.field, err.value.metadata.get("reason")) == (
            "target_scope_id", "out_of_scope")


async def test_pending_shows_conflicts_and_known_facts(stub) -> None:
    owner = await propose(stub, "payments-api", "owned_by", "team-b")
    same = await propose(stub, "payments-api", "depends_on", "ledger")
    # Curated truth published after the proposals were made.
    await ingest(stub, [("payments-api", "owned_by", "team-a", "adr-7"),
                        ("payments-api", "depends_on", "ledger", "adr-7")])
    rows = {p.fact_key: p for p in (await pending(stub)).proposals}
    assert len(rows[owner.fact.fact_key].conflicting_fact_keys) == 1
    assert not rows[owner.fact.fact_key].known_fact_key
    assert rows[same.fact.fact_key].known_fact_key
    assert not rows[same.fact.fact_key].conflicting_fact_keys


async def test_verify_promotes_into_shared_truth_and_lands_in_the_ledger(stub, db) -> None:
    created = await propose(stub)
    key = created.fact.fact_key
    before = await head(stub)
    verified = await stub.VerifyProposal(
        pb.VerifyProposalRequest(
            curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key, trust_tier=0,
            note="checked the handler",
        )
    )
    fact = verified.fact
    assert fact.scope_id == PROJECT and fact.state == pb.FACT_STATE_ACTIVE
    assert fact.trust_tier == 0 and not verified.already_active
    assert fact.citations[0].verification == pb.VERIFICATION_STATE_VERIFIED
    assert fact.citations[0].locator == f"proposal:{key}"
    assert verified.proposal.state == pb.FACT_STATE_SUPERSEDED
    assert verified.proposal.superseded_by == fact.fact_key
    # Both new versions are in the change log, in this call's transaction.
    assert verified.change_position == await head(stub) > before
    changes = await stub.ListChanges(pb.ListChangesRequest(after_position=before))
    assert {c.fact.version_id for c in changes.changes} == {
        fact.version_id, verified.proposal.version_id}
    row = await db.fetchrow("SELECT asserted_by, status FROM assertions WHERE fact_key = $1",
                            fact.fact_key)
    assert str(row["asserted_by"]) == CURATOR and row["status"] == "verified"
    review = await db.fetchrow("SELECT decision, reason, curator_id FROM proposal_reviews")
    assert (review["decision"], review["reason"]) == ("verified", "checked the handler")
    assert (await pending(stub)).total == 0
    # Decided once: a second decision is refused.
    for call in (
        stub.VerifyProposal(pb.VerifyProposalRequest(
            curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key)),
        stub.RejectProposal(pb.RejectProposalRequest(
            curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key, reason="no")),
    ):
        with pytest.raises(InvalidInput) as err:
            await call
        assert err.value.field == "fact_key" and err.value.metadata["reason"] == "not_pending"
    # The agent now learns it as shared truth: proposing again is skipped.
    again = await propose(stub, task_ref="t-2")
    assert again.outcome == pb.PROPOSAL_OUTCOME_SKIPPED and again.fact.fact_key == fact.fact_key


async def test_verify_of_an_already_active_fact_only_adds_the_assertion(stub) -> None:
    created = await propose(stub)  # proposed before the curated copy existed
    await ingest(stub, [("payments-api", "depends_on", "ledger", "adr-7")])
    verified = await stub.VerifyProposal(pb.VerifyProposalRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=created.fact.fact_key))
    assert verified.already_active and len(verified.fact.citations) == 2


async def test_verify_validates_and_is_limited_to_addressed_projects(stub) -> None:
    key = (await propose(stub)).fact.fact_key
    cases = [
        ({"scope_id": OTHER, "fact_key": key}, "fact_key", "not_found"),
        ({"scope_id": PROJECT, "fact_key": "fk_nope"}, "fact_key", "not_found"),
        ({"scope_id": PROJECT, "fact_key": key, "trust_tier": 4}, "trust_tier", "out_of_range"),
        ({"scope_id": PROJECT, "fact_key": key, "authority": 1.5}, "authority", "out_of_range"),
        ({"scope_id": "nope", "fact_key": key}, "scope_id", "malformed"),
    ]
    for kwargs, field, reason in cases:
        with pytest.raises(InvalidInput) as err:
            await stub.VerifyProposal(
                pb.VerifyProposalRequest(curator_principal_id=CURATOR, **kwargs))
        assert (err.value.field, err.value.metadata["reason"]) == (field, reason)
    assert (await pending(stub)).total == 1


async def test_reject_requires_a_reason_and_closes_the_proposal(stub, db) -> None:
    key = (await propose(stub)).fact.fact_key
    with pytest.raises(InvalidInput) as err:
        await stub.RejectProposal(pb.RejectProposalRequest(
            curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key, reason=" "))
    assert err.value.field == "reason"
    before = await head(stub)
    rejected = await stub.RejectProposal(pb.RejectProposalRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=key, reason="not durable"))
    assert rejected.proposal.state == pb.FACT_STATE_RETRACTED
    assert rejected.change_position == await head(stub) == before + 1
    assert await db.fetchval("SELECT reason FROM proposal_reviews") == "not durable"
    assert (await pending(stub)).total == 0
    report = await stub.GetProposalReport(pb.GetProposalReportRequest(
        principal_id=AGENT, context=pb.TaskContext(task_ref="t-1")))
    assert dict(report.state_counts) == {"retracted": 1}


async def test_retract_source_withdraws_retracts_and_audits(stub, db) -> None:
    await ingest(
        stub,
        [
            ("payments-api", "depends_on", "ledger", "adr-7"),
            ("payments-api", "uses", "kafka", "adr-7"),
            ("payments-api", "uses", "kafka", "runbook-1"),
        ],
        sources=("adr-7", "runbook-1"),
    )
    before = await head(stub)
    result = await stub.RetractSource(pb.RetractSourceRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, source_id="adr-7", reason="superseded"))
    assert result.status == pb.RETRACTION_STATUS_RETRACTED
    assert result.assertions_withdrawn == 2
    assert len(result.retracted_fact_keys) == 1 and len(result.still_supported_fact_keys) == 1
    [gone] = (await stub.BatchGetFacts(pb.BatchGetFactsRequest(
        scope_ids=[PROJECT], fact_keys=list(result.retracted_fact_keys)))).facts or [None]
    assert gone is None  # retracted facts leave live reads
    [kept] = (await stub.BatchGetFacts(pb.BatchGetFactsRequest(
        scope_ids=[PROJECT], fact_keys=list(result.still_supported_fact_keys)))).facts
    assert [c.source_id for c in kept.citations] == ["runbook-1"]
    changes = await stub.ListChanges(pb.ListChangesRequest(after_position=before))
    kinds = [c.kind for c in changes.changes]
    assert kinds.count(pb.CHANGE_KIND_FACT_UPSERTED) == 2
    assert kinds.count(pb.CHANGE_KIND_SOURCE_UPSERTED) == 1
    audit = await db.fetchrow("SELECT * FROM audit_events")
    assert str(audit["event_id"]) == result.audit_event_id
    assert (audit["action"], audit["target"], audit["reason"]) == (
        "source_retracted", "adr-7", "superseded")
    assert str(audit["actor_id"]) == CURATOR and str(audit["scope_id"]) == PROJECT
    details = json.loads(audit["details"])  # a JSON object, not a JSON-encoded string
    assert details["retracted_fact_keys"] == list(result.retracted_fact_keys)

    again = await stub.RetractSource(pb.RetractSourceRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, source_id="adr-7", reason="again"))
    assert again.status == pb.RETRACTION_STATUS_ALREADY_RETRACTED and not again.audit_event_id
    assert await db.fetchval("SELECT count(*) FROM audit_events") == 1
    # Publishing the source again later is not blocked by its withdrawn history.
    await ingest(stub, [("payments-api", "depends_on", "ledger", "adr-7")])
    for kwargs, field in (({"source_id": "nope", "reason": "r"}, "source_id"),
                          ({"source_id": "adr-7", "reason": ""}, "reason")):
        with pytest.raises(InvalidInput) as err:
            await stub.RetractSource(pb.RetractSourceRequest(
                curator_principal_id=CURATOR, scope_id=PROJECT, **kwargs))
        assert err.value.field == field


async def test_unknown_predicate_is_refused_with_candidates_and_stores_no_text(stub, db) -> None:
    with pytest.raises(InvalidInput) as err:
        await propose(stub, predicate="depends on")
    assert err.value.field == "predicate"
    assert err.value.metadata["candidates"].split(",")[0] == "depends_on"
    # The attempt is reported as rejected, without the refused text.
    rows = await db.fetch(
        "SELECT outcome, reason, subject, predicate, object FROM proposal_attempts"
    )
    assert [tuple(r) for r in rows] == [("rejected", "unknown_predicate", "", "", "")]
    assert await db.fetchval("SELECT count(*) FROM facts") == 0


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("subject", {"subject": f"key {AWS}"}),
        ("object", {"object_": "postgres://svc:" + "Sup3rS3cret@db:5432/app"}),
        ("evidence_text", {"evidence": "-----BEGIN " + "PRIVATE KEY-----\nMIIE"}),
        ("context.task_ref", {"task_ref": f"deploy with {AWS}"}),
    ],
)
async def test_a_secret_is_refused_and_nothing_is_stored(stub, db, field, kwargs) -> None:
    before = await head(stub)
    with pytest.raises(InvalidInput) as err:
        await propose(stub, **kwargs)
    assert err.value.field == field and err.value.metadata["reason"] == "secret"
    for table in ("facts", "assertions", "evidence", "proposal_targets"):
        assert await db.fetchval(f"SELECT count(*) FROM {table}") == 0, table
    # Only the rejected attempt is kept, holding none of the refused text.
    rows = await db.fetch("SELECT outcome, reason, subject, predicate, object, task_ref"
                          " FROM proposal_attempts")
    task_ref = "" if field == "context.task_ref" else "t-1"  # a field with the secret is blank
    assert [tuple(r) for r in rows] == [("rejected", "secret", "", "", "", task_ref)]
    assert await head(stub) == before


async def test_known_as_of_before_a_source_retraction_shows_its_assertions_verified(
    stub, db
) -> None:
    await ingest(
        stub,
        [("payments-api", "uses", "kafka", "adr-7"), ("payments-api", "uses", "kafka", "rb-1")],
        sources=("adr-7", "rb-1"),
    )
    recorded = await db.fetchval("SELECT max(recorded_at) FROM assertions")
    fact_key_ = await db.fetchval(
        "SELECT fact_key FROM facts WHERE scope_id = $1 AND superseded_at IS NULL",
        uuid.UUID(PROJECT))
    await stub.RetractSource(pb.RetractSourceRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, source_id="adr-7", reason="superseded"))
    before = Timestamp()
    before.FromDatetime(recorded)

    def verification(facts) -> dict[str, int]:
        [f] = facts
        return {c.source_id: c.verification for c in f.citations}

    then = await stub.BatchGetFacts(pb.BatchGetFactsRequest(
        scope_ids=[PROJECT], fact_keys=[fact_key_], known_as_of=before))
    assert verification(then.facts) == {
        "adr-7": pb.VERIFICATION_STATE_VERIFIED, "rb-1": pb.VERIFICATION_STATE_VERIFIED}
    now = await stub.BatchGetFacts(pb.BatchGetFactsRequest(
        scope_ids=[PROJECT], fact_keys=[fact_key_]))
    assert verification(now.facts) == {"rb-1": pb.VERIFICATION_STATE_VERIFIED}
    explained = await stub.ExplainFact(pb.ExplainFactRequest(
        scope_ids=[PROJECT], fact_key=fact_key_, known_as_of=before))
    by_source = {a.source.source_id: a.verification for a in explained.assertions}
    assert by_source["adr-7"] == pb.VERIFICATION_STATE_VERIFIED
    # Today the same assertion reads as withdrawn.
    explained_now = await stub.ExplainFact(pb.ExplainFactRequest(
        scope_ids=[PROJECT], fact_key=fact_key_))
    by_source = {a.source.source_id: a.verification for a in explained_now.assertions}
    assert by_source["adr-7"] == pb.VERIFICATION_STATE_WITHDRAWN


async def test_operator_ontology_file_decides_the_proposal_allowlist(
    pg_dsn: str, tmp_path: Path
) -> None:
    path = tmp_path / "ontology.json"
    path.write_text(json.dumps({
        "version": "ops-3",
        "proposal_predicates": ["mascot_of"],
        "single_valued_predicates": ["team_colour"],
    }))
    settings = knowledge_settings(pg_dsn, knowledge=KnowledgeSettings(ontology_path=path))
    async with knowledge_stub(settings) as ops:
        created = await propose(ops, "payments-api", "mascot_of", "owl")
        assert created.outcome == pb.PROPOSAL_OUTCOME_CREATED
        await propose(ops, "payments-api", "team_colour", "green", task_ref="t-2")
        with pytest.raises(InvalidInput) as err:  # shipped, but not in the operator's file
            await propose(ops, predicate="depends_on", task_ref="t-3")
        assert err.value.field == "predicate"
        assert err.value.metadata["reason"] == "unknown_predicate"
        with pytest.raises(InvalidInput) as err:
            await propose(ops, predicate="mascot of", task_ref="t-4")
        assert err.value.metadata["candidates"].split(",")[0] == "mascot_of"


async def test_curation_list_totals_stop_counting_at_the_limit(pg_dsn: str) -> None:
    """Each curation list counts at most VERA_KNOWLEDGE__MAX_COUNTED_ROWS rows; past it
    the total is the limit and flagged a lower bound, and the pages go on to the end."""
    settings = knowledge_settings(pg_dsn, knowledge=KnowledgeSettings(max_counted_rows=2))
    async with knowledge_stub(settings) as stub:
        await ingest(stub, [("payments-api", "owned_by", "team-a", "adr-1")],
                     sources=("adr-1", "adr-2", "adr-3"))
        for name in ("a", "b", "c"):
            await propose(stub, name, object_="ledger")
            await propose(stub, "payments-api", "owned_by", f"team-{name}z")

        proposals = await pending(stub, page_size=1)
        attempts = await stub.ListConflictedAttempts(
            pb.ListConflictedAttemptsRequest(scope_id=PROJECT, page_size=1))
        sources = await stub.ListSources(pb.ListSourcesRequest(scope_id=PROJECT, page_size=1))
        for reply in (proposals, attempts, sources):
            assert (reply.total, reply.total_is_lower_bound) == (2, True)

        seen, token = [], ""
        while True:
            page = await stub.ListSources(
                pb.ListSourcesRequest(scope_id=PROJECT, page_size=1, page_token=token))
            seen += [s.source.source_id for s in page.sources]
            token = page.next_page_token
            if not token:
                break
        assert seen == ["adr-1", "adr-2", "adr-3"]

        other = await pending(stub, OTHER)
        assert (other.total, other.total_is_lower_bound) == (0, False)
        await propose(stub, "d", object_="ledger", readable=(OTHER,))
        await propose(stub, "e", object_="ledger", readable=(OTHER,))
        exact = await pending(stub, OTHER)
        assert (exact.total, exact.total_is_lower_bound) == (2, False)


async def test_two_person_verification_refuses_the_proposer_and_is_off_by_default(
        stub, db) -> None:
    """issue 39 item 16: a project's two-person verification setting, off by default; when
    on, the principal that proposed (here AGENT, the proposer an agent acted as) may not
    verify their own proposal, anyone else may, and direct curation stays possible."""
    settings = await stub.GetCurationSettings(pb.GetCurationSettingsRequest(scope_id=PROJECT))
    assert not settings.settings.two_person_verification
    own = await propose(stub, "a", object_="x")
    # Off: the proposer, also a curator of the project, may verify their own.
    verified = await stub.VerifyProposal(pb.VerifyProposalRequest(
        curator_principal_id=AGENT, scope_id=PROJECT, fact_key=own.fact.fact_key))
    assert verified.fact.state == pb.FACT_STATE_ACTIVE

    changed = await stub.SetCurationSettings(pb.SetCurationSettingsRequest(
        principal_id=CURATOR, scope_id=PROJECT,
        settings=pb.CurationSettings(two_person_verification=True)))
    assert changed.settings.two_person_verification
    assert (await stub.GetCurationSettings(pb.GetCurationSettingsRequest(
        scope_id=PROJECT))).settings.two_person_verification
    assert not (await stub.GetCurationSettings(pb.GetCurationSettingsRequest(
        scope_id=OTHER))).settings.two_person_verification
    row = await db.fetchrow("SELECT changed_by FROM curation_settings WHERE scope_id = $1",
                            uuid.UUID(PROJECT))
    assert str(row["changed_by"]) == CURATOR

    second = await propose(stub, "b", object_="y")
    with pytest.raises(Unauthorized) as refused:
        await stub.VerifyProposal(pb.VerifyProposalRequest(
            curator_principal_id=AGENT, scope_id=PROJECT, fact_key=second.fact.fact_key))
    assert refused.value.metadata["reason"] == "two_person_verification"
    assert [p.fact_key for p in (await pending(stub)).proposals] == [second.fact.fact_key]
    # The proposer may still withdraw it by rejecting; another curator verifies it.
    verified = await stub.VerifyProposal(pb.VerifyProposalRequest(
        curator_principal_id=CURATOR, scope_id=PROJECT, fact_key=second.fact.fact_key))
    assert verified.fact.state == pb.FACT_STATE_ACTIVE
    # A curator's own direct curation is not a proposal: it stays possible, with its actor.
    loaded = await ingest(stub, [("payments-api", "depends_on", "kafka", "adr-7")])
    assert loaded.facts.created == 1
    feed = await stub.ListScopeChanges(pb.ListScopeChangesRequest(
        scope_ids=[PROJECT], page_size=50, newest_first=True))
    latest = feed.changes[0]
    assert (latest.change, latest.actor_principal_id) == ("published", CURATOR)
