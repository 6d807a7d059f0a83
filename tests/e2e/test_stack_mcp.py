"""The foundation's acceptance test: the running stack, driven through the official MCP
client over HTTP, exactly as an agent would use it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, MCPError

from vera.local_secret import read_secret
from vera.services.retrieval.server import MEMORY_SNAPSHOT
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

REPO = "https://ci-bot:s3cret@github.com/Acme/Payments.git"
RECORDS = [
    {"type": "source", "id": "adr-7", "source_type": "adr", "title": "ADR 7: Ledger storage",
     "uri": "https://wiki.example/adr/7", "observed_at": "2026-10-02T00:00:00Z"},
    {"type": "source", "id": "runbook-3", "source_type": "runbook", "title": "Payments on-call",
     "uri": "https://wiki.example/runbooks/3", "observed_at": "2026-09-12T00:00:00Z"},
    {"type": "entity", "name": "payments-api", "aliases": ["payments service"], "kind": "service"},
    {"type": "fact", "subject": "payments-api", "predicate": "uses_database",
     "object": "PostgreSQL 16 with logical replication to the ledger warehouse",
     "source": "adr-7", "evidence": "We store the ledger in PostgreSQL 16 and replicate it.",
     "locator": "L10-L20", "valid_from": "2025-01-02T00:00:00Z", "trust_tier": 1,
     "authority": 0.9, "repository": REPO, "code_path": "services/payments"},
    {"type": "fact", "subject": "payments-api", "predicate": "deploys_to",
     "object": "the eu-west-1 Kubernetes cluster via Argo CD", "source": "runbook-3",
     "evidence": "Deploys go out through Argo CD to eu-west-1.", "locator": "§2"},
    {"type": "fact", "subject": "payments-api", "predicate": "on_call_rotation",
     "object": "the payments team pager rotation, weekly handover on Mondays",
     "source": "runbook-3", "evidence": "Handover is Monday 10:00.", "locator": "§4"},
]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n")
    return path


async def call(client: Client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def test_ingest_then_ground_propose_persist_and_feedback(stack, tmp_path: Path):
    good = write_jsonl(tmp_path / "payments.jsonl", RECORDS)
    first = stack.vera("ingest", str(good), "--project", "payments", "--data-dir",
                       str(stack.data_dir))
    assert first.returncode == 0, first.stderr
    assert "3 created, 0 deduplicated" in first.stdout  # facts

    again = stack.vera("ingest", str(good), "--project", "payments", "--data-dir",
                       str(stack.data_dir))
    assert again.returncode == 0, again.stderr
    assert "0 created, 3 deduplicated" in again.stdout

    bad = write_jsonl(tmp_path / "bad.jsonl", [
        {"type": "fact", "subject": "billing-api", "predicate": "owned_by", "object": "team x"},
        {"type": "fact", "subject": "billing-api", "predicate": "owned_by", "trust_tier": 9,
         "object": "team y"},
    ])
    rejected = stack.vera("ingest", str(bad), "--project", "payments", "--data-dir",
                          str(stack.data_dir))
    assert rejected.returncode == 2
    assert "line 2" in rejected.stderr and "trust_tier" in rejected.stderr

    async with stack.mcp_client() as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert len(tools) == 10 and "knowledge_get_context" in tools

        boot = await call(client, "knowledge_bootstrap", repository=REPO, branch="main")
        assert boot["repository"]["status"] == "selected"
        assert boot["repository"]["canonical_repository"] == "github.com/Acme/Payments"
        assert boot["auth_profile"] == "local-dev"

        context = await call(client, "knowledge_get_context",
                             query="which database does the payments service store data in?",
                             project="payments")
        assert context["persisted"] is False and context["pack_id"] is None
        top = context["results"][0]
        assert top["predicate"] == "uses_database"
        citation = top["citations"][0]
        assert citation["source_id"] == "adr-7" and citation["locator"] == "L10-L20"
        assert citation["verification"] == "verified"
        # The bad file wrote nothing.
        billing = await call(client, "knowledge_search", query="who owns billing-api",
                             project="payments")
        assert all(r["subject"] != "billing-api" for r in billing["results"])

        proposal = await call(client, "knowledge_propose", subject="payments-api",
                              predicate="retry_policy", object="three times with backoff",
                              evidence_text="seen in handler.py", task_ref="task-42",
                              runtime="claude-code")
        assert proposal["outcome"] == "created"
        fact_key = proposal["fact"]["fact_key"]
        report = await call(client, "knowledge_proposal_report", task_ref="task-42")
        assert report["counts"]["created"] == 1
        assert [a["fact_key"] for a in report["attempts"]] == [fact_key]
        retracted = await call(client, "knowledge_retract_proposal", fact_key=fact_key)
        assert retracted["status"] == "retracted"
        retry = await call(client, "knowledge_retract_proposal", fact_key=fact_key)
        assert retry["status"] == "already_retracted"

        persisted = await call(client, "knowledge_get_context", project="payments",
                               query="how is payments-api deployed?", persist=True)
        assert persisted["persisted"] is True and persisted["pack_id"]
        pack = await call(client, "knowledge_get_context_pack", pack_id=persisted["pack_id"])
        assert [r["fact_key"] for r in pack["results"]] == [
            r["fact_key"] for r in persisted["results"]]
        ref = persisted["results"][0]["result_ref"]
        first_signal = await call(client, "knowledge_feedback",
                                  context_pack_id=persisted["pack_id"], result_ref=ref,
                                  signal="up")
        assert first_signal["signal"] == "up" and first_signal["created"] is True
        replay = await call(client, "knowledge_feedback", context_pack_id=persisted["pack_id"],
                            result_ref=ref, signal="down")
        assert replay["signal"] == "up" and replay["created"] is False

        for tool, arguments, field in [
            ("knowledge_get_context", {"query": "x", "limit": 51}, "limit"),
            ("knowledge_get_context", {"query": "x", "token_budget": 99}, "token_budget"),
            ("knowledge_search", {"query": ""}, "query"),
            ("knowledge_feedback", {"context_pack_id": persisted["pack_id"],
                                    "result_ref": ref, "signal": "sideways"}, "signal"),
        ]:
            with pytest.raises(MCPError) as caught:
                await client.call_tool(tool, arguments)
            assert caught.value.code == -32602
            assert caught.value.data["code"] == "invalid_input"
            assert caught.value.data["field"] == field


def test_rest_api_reports_live_and_ready(stack):
    api = f"http://127.0.0.1:{stack.env['VERA_API__PORT']}"
    assert httpx.get(f"{api}/livez").json()["status"] == "ok"
    assert httpx.get(f"{api}/readyz").json() == {"status": "ok", "failing": []}


def test_rest_administration_over_loopback_needs_the_data_dirs_secret(stack):
    """Another user of the machine reaches the loopback port too; only the data dir's
    secret (which `vera` commands read themselves) makes a request the administrator."""
    api = f"http://127.0.0.1:{stack.env['VERA_API__PORT']}"
    secret = read_secret(stack.data_dir)
    assert secret is not None
    for headers in ({}, {"authorization": f"Bearer {'0' * 64}"}):
        refused = httpx.get(f"{api}/identity/me", headers=headers)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthenticated"
    me = httpx.get(f"{api}/identity/me", headers={"authorization": f"Bearer {secret}"})
    assert me.status_code == 200 and me.json()["admin"] is True


def test_metrics_listener_is_separate_and_bounded(stack):
    port = stack.env["VERA_OBSERVABILITY__MCP_METRICS_PORT"]
    body = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    assert "vera_mcp_tool_calls_total" in body
    assert httpx.get(f"http://127.0.0.1:{stack.port}/metrics").status_code == 404


async def test_facts_survive_a_restart(stack, tmp_path: Path):
    durable = write_jsonl(tmp_path / "durable.jsonl", [
        {"type": "fact", "subject": "ledger-service", "predicate": "written_in",
         "object": "Rust with the tokio runtime"}])
    loaded = stack.vera("ingest", str(durable), "--project", "ledger", "--data-dir",
                        str(stack.data_dir))
    assert loaded.returncode == 0, loaded.stderr
    assert stack.stop() == 0
    snapshot = stack.data_dir / MEMORY_SNAPSHOT  # retrieval left its memory at its stop
    written = snapshot.stat().st_mtime_ns
    stack.start()
    async with stack.mcp_client() as client:
        found = await call(client, "knowledge_search", query="ledger-service written in Rust",
                           project="ledger")
        assert [r["object"] for r in found["results"]] == ["Rust with the tokio runtime"]
    assert snapshot.stat().st_mtime_ns == written  # reused: a refill would have written one

    # A fact indexed after that snapshot, then a crash: the restarted replica reloads the
    # snapshot and reads the documents written since.
    later = write_jsonl(tmp_path / "later.jsonl", [
        {"type": "fact", "subject": "ledger-service", "predicate": "deployed_with",
         "object": "blue-green releases behind a feature flag"}])
    loaded = stack.vera("ingest", str(later), "--project", "ledger", "--data-dir",
                        str(stack.data_dir))
    assert loaded.returncode == 0, loaded.stderr
    before = read_stack_file(stack.data_dir)
    os.kill(before["pids"]["retrieval"], signal.SIGKILL)
    give_up = time.monotonic() + 120
    async with stack.mcp_client() as client:
        while True:
            restarted = read_stack_file(stack.data_dir)["restarts"]["retrieval"] > 0
            with contextlib.suppress(MCPError):  # retrieval unavailable meanwhile
                found = await call(client, "knowledge_search",
                                   query="how is ledger-service deployed", project="ledger")
                if restarted:
                    break
            assert time.monotonic() < give_up, stack.log_tail()
            await anyio.sleep(0.5)
    objects = [r["object"] for r in found["results"]]
    assert objects[0] == "blue-green releases behind a feature flag", objects
    assert snapshot.stat().st_mtime_ns == written


async def test_a_curator_verifies_a_proposal_with_the_cli(stack, tmp_path: Path):
    seed = write_jsonl(tmp_path / "billing.jsonl", [
        {"type": "fact", "subject": "billing-api", "predicate": "depends_on",
         "object": "the payments ledger"}])
    assert stack.vera("ingest", str(seed), "--project", "billing", "--data-dir",
                      str(stack.data_dir)).returncode == 0
    async with stack.mcp_client() as client:
        proposal = await call(client, "knowledge_propose", subject="billing-api",
                              predicate="owned_by", object="the billing squad",
                              task_ref="task-curate", project="billing")
        fact_key = proposal["fact"]["fact_key"]

    curate = ("curate", "--data-dir", str(stack.data_dir), "--json")
    listed = stack.vera(*curate, "list", "billing")
    assert listed.returncode == 0, listed.stderr
    assert fact_key in [p["fact_key"] for p in json.loads(listed.stdout)["proposals"]]
    verified = stack.vera(*curate, "verify", "billing", fact_key, "--note", "checked")
    assert verified.returncode == 0, verified.stderr
    refused = stack.vera(*curate, "reject", "billing", fact_key, "--reason", "too late")
    assert refused.returncode == 2  # already decided: a stable error, not a crash

    async with stack.mcp_client() as client:
        found = await call(client, "knowledge_search", query="who owns billing-api",
                           project="billing")
    owned = [r for r in found["results"] if r["predicate"] == "owned_by"]
    assert [(r["object"], r["state"]) for r in owned] == [("the billing squad", "active")]
    assert owned[0]["citations"][0]["verification"] == "verified"
