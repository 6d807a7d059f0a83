"""Tool bodies through the real client: translations to the services and back.

Every successful result is also validated by the client against the declared
outputSchema, so these tests pin the structured shape as well as the values.
"""

from __future__ import annotations

import json

from harness import mcp_client, without_ids

from vera.retrieval.v1 import retrieval_pb2

PERSONAL_SCOPE, SHARED_SCOPE = "scope-personal", "scope-acme"


async def call(gateway, tool: str, arguments: dict) -> dict:
    async with mcp_client(gateway.url) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error
    assert result.content and result.content[0].type == "text" and result.content[0].text
    return result.structured_content


async def test_bootstrap_reports_principal_capabilities_and_repository(gateway):
    data = await call(
        gateway,
        "knowledge_bootstrap",
        {"repository": "https://github.com/acme/billing", "branch": "main", "code_path": "src"},
    )
    assert data["server_version"] == "0.2.1"
    assert data["contract_versions"]["vera_integration_contract"] == 1
    assert data["contract_versions"]["mcp_protocol"]
    assert data["principal"] == {
        "principal_id": "00000000-0000-4000-8000-00000000cafe",
        "personal_scope_id": PERSONAL_SCOPE,
    }
    assert data["auth_profile"] == "local-dev"
    assert {c["class"]: c["scope"] for c in data["capabilities"] if c["granted"]} == {
        "READ": "memory:read",
        "PROPOSE": "memory:propose",
        "FEEDBACK": "memory:feedback",
        "SNAPSHOT": "memory:snapshot",
    }
    assert data["tool_profile"] == "coding"
    assert {p["slug"]: p["kind"] for p in data["readable_projects"]} == {
        "me": "personal",
        "acme": "shared",
    }
    repo = data["repository"]
    assert repo["status"] == "selected"
    assert repo["canonical_repository"] == "github.com/acme/billing"
    assert repo["project"]["slug"] == "acme"
    assert repo["branch"] == "main"
    assert data["save_mode"] == {
        "default": "suggest",
        "allowed": ["off", "suggest", "auto-propose"],
        "auto_propose_allowed": True,
    }
    assert "results" not in data  # no knowledge content


async def test_bootstrap_selection_required_and_detached_head(gateway):
    data = await call(
        gateway, "knowledge_bootstrap", {"repository": "https://github.com/acme/many"}
    )
    repo = data["repository"]
    assert repo["status"] == "selection_required"
    assert repo["project"] is None
    assert [c["slug"] for c in repo["candidates"]] == ["acme", "me"]
    assert repo["branch"] is None
    data = await call(gateway, "knowledge_bootstrap", {})
    assert data["repository"]["status"] == "unmapped"


async def test_get_context_is_ephemeral_by_default_with_canonical_request(gateway, fakes):
    data = await call(
        gateway,
        "knowledge_get_context",
        {
            "query": "how is billing stored",
            "repository": "github.com/acme/billing",
            "conflict_handling": "exclude",
            "include_predicates": ["uses_database"],
        },
    )
    assert data["persisted"] is False
    assert data["pack_id"] is None and data["expires_at"] is None
    assert data["assembler_version"] == "asm-1" and data["token_estimate"] == 321
    assert data["empty_reason"] is None
    assert [r["rank"] for r in data["results"]] == [1, 2]
    first = data["results"][0]
    assert first["state"] == "active" and first["project_id"] == SHARED_SCOPE
    assert first["repository"] == "github.com/acme/billing"
    assert "branch" not in first  # bindings appear only when set
    assert first["signals"] == {"dense": 1.5, "lexical": 0.25}
    assert first["citations"][0] == {
        "source_id": "adr-7",
        "locator": "L10-20",
        "title": "ADR 7",
        "uri": "https://x/adr-7",
        "excerpt": "We use postgres",
        "verification": "verified",
    }
    assert data["conflicts"][0]["fact_keys"] == ["fact-1", "fact-9"]
    assert data["freshness_warnings"][0]["reason"] == "source_stale"
    assert data["omitted"] == [{"fact_key": "fact-3", "reason": "token_budget"}]
    request = data["request"]
    assert request["project"] == {"project_id": SHARED_SCOPE, "slug": "acme"}
    assert (request["limit"], request["token_budget"], request["citation_mode"]) == (
        10,
        2000,
        "full",
    )
    assert request["persist"] is False and request["snapshot_id"] is None
    sent = fakes.rec.last("AssembleContext")
    assert sent.scope_id == SHARED_SCOPE and sent.query == "how is billing stored"
    assert sent.filters.conflict_handling == retrieval_pb2.CONFLICT_HANDLING_EXCLUDE
    assert list(sent.filters.include_predicates) == ["uses_database"]
    assert not sent.filters.HasField("min_authority")
    assert fakes.rec.last("ResolveProject").project == ""


async def test_compact_citations_and_empty_answer(gateway, fakes):
    data = await call(gateway, "knowledge_get_context", {"query": "q", "citation_mode": "compact"})
    assert data["results"][0]["citations"] == [
        {"source_id": "adr-7", "locator": "L10-20", "verification": "verified"}
    ]
    assert fakes.rec.last("AssembleContext").compact_citations is True
    data = await call(gateway, "knowledge_get_context", {"query": "nothing"})
    assert data["results"] == [] and data["empty_reason"] == "no_matching_knowledge"


async def test_persisted_pack_round_trips(gateway, fakes):
    data = await call(
        gateway, "knowledge_get_context", {"query": "billing", "persist": True, "usage_ref": "u-1"}
    )
    assert data["persisted"] is True and data["pack_id"]
    assert data["expires_at"] == "2025-02-01T00:00:00Z"
    stored = fakes.rec.last("CreateContextPack")
    assert stored.scope_id == SHARED_SCOPE and stored.assembler_version == "asm-1"
    canonical_request = json.loads(stored.canonical_request_json)
    assert canonical_request["query"] == "billing"
    # Attribution travels beside the canonical request, never inside a pack's identity.
    assert "usage_ref" not in canonical_request and stored.usage_ref == "u-1"
    again = await call(gateway, "knowledge_get_context_pack", {"pack_id": data["pack_id"]})
    assert again["persisted"] is True and again["pack_id"] == data["pack_id"]
    assert again["results"] == data["results"]
    assert again["request"] == data["request"]
    assert again["results"][0]["rank"] == 1 and isinstance(again["results"][0]["rank"], int)


async def test_feedback_takes_query_rank_and_signals_from_the_pack(gateway, fakes):
    pack = await call(gateway, "knowledge_get_context", {"query": "billing db", "persist": True})
    pack_id = pack["pack_id"]
    data = await call(
        gateway,
        "knowledge_feedback",
        {"context_pack_id": pack_id, "result_ref": "ref-2", "signal": "up"},
    )
    assert data["signal"] == "up" and data["created"] is True and data["level"] == "result"
    sent = fakes.rec.last("RecordFeedback")
    assert sent.query == "billing db"
    assert sent.rank == 2
    assert dict(sent.signal_vector) == {"dense": 2.5, "lexical": 0.5}
    assert sent.fact_key == "fact-2"
    assert sent.personal_scope_id == PERSONAL_SCOPE
    # A retry returns the stored signal, whatever the caller now says.
    data = await call(
        gateway,
        "knowledge_feedback",
        {"context_pack_id": pack_id, "result_ref": "ref-2", "signal": "down"},
    )
    assert data["signal"] == "up" and data["created"] is False
    # Pack-level feedback has no rank or signal vector.
    data = await call(
        gateway,
        "knowledge_feedback",
        {"context_pack_id": pack_id, "result_ref": pack_id, "signal": "down"},
    )
    assert data["level"] == "pack"
    sent = fakes.rec.last("RecordFeedback")
    assert (sent.rank, dict(sent.signal_vector), sent.fact_key) == (0, {}, "")


async def test_feedback_on_a_result_not_in_the_pack_is_invalid(gateway, call_error):
    pack = await call(gateway, "knowledge_get_context", {"query": "q", "persist": True})
    async with mcp_client(gateway.url) as client:
        error = await call_error(
            client,
            "knowledge_feedback",
            {"context_pack_id": pack["pack_id"], "result_ref": "ref-99", "signal": "up"},
        )
    assert error.code == -32602
    assert without_ids(error.data) == {
        "code": "invalid_input", "field": "result_ref", "reason": "not_in_pack",
    }


async def test_search_spans_readable_scopes_or_one_project(gateway, fakes):
    data = await call(gateway, "knowledge_search", {"query": "db", "limit": 3})
    assert [r["fact_key"] for r in data["results"]] == ["fact-1"]
    sent = fakes.rec.last("Search")
    assert list(sent.scope_ids) == [PERSONAL_SCOPE, SHARED_SCOPE] and sent.limit == 3
    await call(gateway, "knowledge_search", {"query": "db", "project": "acme"})
    assert list(fakes.rec.last("Search").scope_ids) == [SHARED_SCOPE]
    data = await call(gateway, "knowledge_search", {"query": "nothing"})
    assert data["results"] == [] and data["empty_reason"] == "no_matching_knowledge"


async def test_unknown_fact_key_is_invalid_input(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        # "missing" fails NOT_FOUND, "gone" INVALID_INPUT as the knowledge service does.
        for tool in ("knowledge_explain_fact", "knowledge_get_evidence"):
            for key in ("missing", "gone"):
                error = await call_error(client, tool, {"fact_key": key})
                assert without_ids(error.data) == {
                    "code": "invalid_input",
                    "field": "fact_key",
                    "reason": "not_found",
                }


async def test_explain_fact_and_evidence(gateway, fakes):
    data = await call(
        gateway, "knowledge_explain_fact", {"fact_key": "fact-1", "as_of": "2024-01-01T00:00:00Z"}
    )
    assert data["fact"]["fact_key"] == "fact-1"
    assert [a["assertion_id"] for a in data["supporting"]] == ["a1"]
    assert [a["assertion_id"] for a in data["refuting"]] == ["a2"]
    assert data["supporting"][0]["source"]["source_id"] == "adr-7"
    assert data["refuting"][0]["verification"] == "unverified"
    sent = fakes.rec.last("ExplainFact")
    assert list(sent.scope_ids) == [PERSONAL_SCOPE, SHARED_SCOPE] and sent.HasField("as_of")
    data = await call(gateway, "knowledge_get_evidence", {"fact_key": "fact-1", "limit": 1})
    assert data["total"] == 2 and len(data["evidence"]) == 1
    assert data["evidence"][0]["text"] == "We use postgres"
    assert data["empty_reason"] is None


async def test_proposal_lifecycle(gateway, fakes, call_error):
    data = await call(
        gateway,
        "knowledge_propose",
        {
            "subject": "billing",
            "predicate": "owned_by",
            "object": "team-pay",
            "evidence_text": "",
            "runtime": "claude-code",
            "task_ref": "T-1",
        },
    )
    assert data["outcome"] == "created" and data["attempt_id"] == "att-1"
    assert data["fact"]["state"] == "proposed" and data["reason"] is None
    sent = fakes.rec.last("ProposeFact")
    assert sent.personal_scope_id == PERSONAL_SCOPE
    assert list(sent.readable_scope_ids) == [PERSONAL_SCOPE, SHARED_SCOPE]
    assert (sent.context.runtime, sent.context.task_ref, sent.context.session_ref) == (
        "claude-code",
        "T-1",
        "",
    )

    first = await call(gateway, "knowledge_retract_proposal", {"fact_key": "proposed-9"})
    again = await call(gateway, "knowledge_retract_proposal", {"fact_key": "proposed-9"})
    assert (first["status"], again["status"]) == ("retracted", "already_retracted")
    async with mcp_client(gateway.url) as client:
        error = await call_error(client, "knowledge_retract_proposal", {"fact_key": "missing"})
    assert without_ids(error.data) == {
        "code": "invalid_input", "field": "fact_key", "reason": "not_found",
    }

    report = await call(gateway, "knowledge_proposal_report", {"task_ref": "T-1", "limit": 5})
    assert report["counts"] == {"created": 1, "deduplicated": 2}
    assert report["state_counts"] == {"proposed": 1}
    assert report["total"] == 3 and report["next_cursor"] == "page-2"
    assert report["attempts"][0]["context"]["task_ref"] == "T-1"
    assert report["attempts"][0]["fact_state"] == "proposed"
    sent = fakes.rec.last("GetProposalReport")
    assert (sent.page_size, sent.context.task_ref) == (5, "T-1")
