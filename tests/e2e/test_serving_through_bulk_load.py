"""Queries keep being answered while a bulk load is indexed and the embedded vector index
rebuilds its HNSW graph: heavy work never makes a service unreachable."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import scale_corpus, scale_measure
from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e

PROJECT = "bulk"
# Enough points for the background HNSW build: qdrant-edge builds a graph only for a
# segment over its indexing threshold (6k MiniLM vectors stay under it, 10k do not).
FACTS = 10_000


@pytest.fixture(scope="module")
def bulk_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("bulk-stack") / "data"
    with launch(data_dir, launch_env(data_dir, VERA_MCP__QUOTA_ENABLED="false")) as running:
        yield running


async def _ask_until(stop: asyncio.Event, stack: LaunchedStack, questions: list[str],
                     seen: dict) -> None:
    """Alternates knowledge_search and knowledge_get_context until ``stop``; every answer
    is recorded: its error code or its retrieval mode."""
    async with stack.mcp_client() as client:
        n = 0
        while not stop.is_set():
            tool = ("knowledge_search", "knowledge_get_context")[n % 2]
            result = await client.call_tool(
                tool, {"query": questions[n % len(questions)], "project": PROJECT, "limit": 5}
            )
            if result.is_error:
                seen["errors"].append(str(result.content)[:300])
            else:
                seen["modes"][result.structured_content["retrieval_mode"]] += 1
            seen["phases"][seen["phase"]] += 1
            n += 1


async def test_queries_are_answered_through_a_bulk_load_and_the_index_build(
    bulk_stack: LaunchedStack, tmp_path: Path
) -> None:
    corpus = scale_corpus.generate(FACTS, facts_per_file=500, questions=20)
    (tmp_path / "corpus").mkdir()
    paths = scale_corpus.write_files(corpus, tmp_path / "corpus")
    data_dir = bulk_stack.data_dir
    # The first file through `vera ingest`, which creates the project the questions ask;
    # the rest as fast as the loader goes.
    first, rest = paths[0], paths[1:]
    ingested = bulk_stack.vera(
        "ingest", str(first), "--project", PROJECT, "--data-dir", str(data_dir)
    )
    assert ingested.returncode == 0, ingested.stderr
    seen: dict = {"errors": [], "modes": Counter(), "phases": Counter(), "phase": "load"}
    stop = asyncio.Event()
    asking = asyncio.create_task(
        _ask_until(stop, bulk_stack, [q.text for q in corpus.questions], seen)
    )
    try:
        loaded = await scale_measure.load_corpus(rest, data_dir, PROJECT)
        seen["phase"] = "index build"
        built = await scale_measure.wait_for_hnsw(data_dir, give_up_s=240)
        seen["phase"] = "after"
        await asyncio.sleep(1)
    finally:
        stop.set()
        await asking
    assert loaded["facts"] + 500 == FACTS  # the first file came through `vera ingest`
    assert built["hnsw_segments"] >= 1  # the graph was built while questions were asked
    assert seen["errors"] == []
    assert seen["phases"]["load"] > 0 and seen["phases"]["index build"] > 0
    assert set(seen["modes"]) == {"hybrid"}  # nothing had to degrade either

    async with bulk_stack.mcp_client() as client:
        found = 0
        for question in corpus.questions:
            result = await client.call_tool(
                "knowledge_search", {"query": question.text, "project": PROJECT, "limit": 10}
            )
            assert not result.is_error
            found += any(
                c.get("source_id") == question.source_id
                for r in result.structured_content["results"]
                for c in r.get("citations") or []
            )
    assert found >= len(corpus.questions) * 0.8  # the loaded facts are what answers
