"""A snapshot reproduces knowledge_get_context and knowledge_search after later writes,
on the real stack (advanced profile) through the real MCP client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e

PROJECT = "ledger-snap"
BEFORE = [
    {"type": "source", "id": "adr-9", "source_type": "adr", "title": "ADR 9: Ledger storage",
     "observed_at": "2026-10-02T00:00:00Z"},
    {"type": "fact", "subject": "ledger-api", "predicate": "uses_database",
     "object": "PostgreSQL 16 for the ledger tables", "source": "adr-9",
     "evidence": "The ledger lives in PostgreSQL 16.", "locator": "L1"},
    {"type": "fact", "subject": "ledger-api", "predicate": "deploys_to",
     "object": "the eu-west-1 cluster", "source": "adr-9", "evidence": "eu-west-1.",
     "locator": "L2"},
]
AFTER = [
    {"type": "source", "id": "adr-10", "source_type": "adr", "title": "ADR 10: Ledger cache",
     "observed_at": "2026-11-02T00:00:00Z"},
    {"type": "fact", "subject": "ledger-cache", "predicate": "uses_database",
     "object": "Redis 7 as the ledger database cache", "source": "adr-10",
     "evidence": "Ledger reads go through Redis 7.", "locator": "L3"},
]
QUERY = "which database does the ledger use"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    """This module's own stack: the shared one serves the default coding profile, and the
    snapshot tools are visible only in the advanced profile."""
    data_dir = tmp_path_factory.mktemp("advanced-stack") / "data"
    with launch(data_dir, launch_env(data_dir, VERA_MCP__TOOL_PROFILE="advanced")) as running:
        yield running


OTHER_PROJECT = "ledger-other"
# A later write in the snapshot's source and another in a different project: neither may
# move a replayed score.
AFTER_SAME_SOURCE = [
    {"type": "source", "id": "adr-9", "source_type": "adr", "title": "ADR 9: Ledger storage",
     "observed_at": "2026-10-02T00:00:00Z"},
    {"type": "fact", "subject": "ledger-api", "predicate": "runs_on",
     "object": "the ledger database host db-7", "source": "adr-9",
     "evidence": "The ledger database runs on db-7.", "locator": "L1b"},
]
AFTER_OTHER_PROJECT = [
    {"type": "source", "id": "adr-1", "source_type": "adr", "title": "ADR 1: Billing",
     "observed_at": "2026-11-02T00:00:00Z"},
    {"type": "fact", "subject": "billing-api", "predicate": "uses_database",
     "object": "the ledger database MySQL 8", "source": "adr-1",
     "evidence": "Billing uses the ledger database MySQL 8.", "locator": "L1"},
]


def ingest(stack, path: Path, records: list[dict], project: str = PROJECT) -> None:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    done = stack.vera("ingest", str(path), "--project", project, "--data-dir", str(stack.data_dir))
    assert done.returncode == 0, done.stderr


async def call(client: Client, tool: str, **arguments) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def keys(data: dict) -> list[tuple[str, str]]:
    return [(r["fact_key"], r["object"]) for r in data["results"]]


def ranked(data: dict) -> list[tuple[str, int, float]]:
    return [(r["fact_key"], r["rank"], r["score"]) for r in data["results"]]


async def test_snapshot_reproduces_results_after_later_writes(stack, tmp_path: Path):
    ingest(stack, tmp_path / "before.jsonl", BEFORE)
    async with stack.mcp_client() as client:
        boot = await call(client, "knowledge_bootstrap")
        assert boot["tool_profile"] == "advanced"
        snapshot = await call(client, "knowledge_create_snapshot", project=PROJECT)
        assert snapshot["fact_count"] == 2
        assert snapshot["versions"]["embedding"] == "minilm-l6-v2-int8"  # the default precision
        assert snapshot["versions"]["ontology"]  # the knowledge service's ontology version
        context_then = await call(client, "knowledge_get_context", query=QUERY, project=PROJECT)
        search_then = await call(client, "knowledge_search", query=QUERY, project=PROJECT)
        assert any("PostgreSQL" in obj for _, obj in keys(context_then))
        sid = snapshot["snapshot_id"]
        context_pinned = await call(client, "knowledge_get_context", query=QUERY, snapshot_id=sid)
        search_pinned = await call(client, "knowledge_search", query=QUERY, snapshot_id=sid)

        ingest(stack, tmp_path / "after.jsonl", AFTER)
        ingest(stack, tmp_path / "after-source.jsonl", AFTER_SAME_SOURCE)
        ingest(stack, tmp_path / "after-other.jsonl", AFTER_OTHER_PROJECT, OTHER_PROJECT)
        context_now = await call(client, "knowledge_get_context", query=QUERY, project=PROJECT)
        assert any("Redis" in obj for _, obj in keys(context_now))  # the later write is live

        replayed = await call(client, "knowledge_get_context", query=QUERY, snapshot_id=sid)
        searched = await call(client, "knowledge_search", query=QUERY, snapshot_id=sid)
        # The replay returns exactly the ranking of the frozen view: the same facts in the
        # same order with the same ranks and scores (corpus statistics count only the
        # versions visible at the snapshot), before and after later writes in the same
        # source and in another project.
        for replay, then in ((replayed, context_pinned), (searched, search_pinned)):
            assert ranked(replay) == ranked(then)
            assert keys(replay) == keys(then)
        for replay, then in ((replayed, context_then), (searched, search_then)):
            assert sorted(keys(replay)) == sorted(keys(then))
            assert not any(w in obj for _, obj in keys(replay) for w in ("Redis", "db-7"))
        again = await call(client, "knowledge_get_snapshot", snapshot_id=sid)
        assert again == snapshot
