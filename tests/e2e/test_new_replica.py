"""A retrieval replica that starts with an empty data directory (a new pod) copies the
index writer's memory snapshot from PostgreSQL (services/retrieval/memory/snapshot_shared.py)
instead of refilling: the real `vera up`, its PostgreSQL and the official `mcp` client."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from vera.services.retrieval.server import MEMORY_SNAPSHOT
from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e

SHARING = {
    "VERA_RETRIEVAL__SHARE_MEMORY_SNAPSHOT": "true",
    "VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY": "e2e-retrieval-snapshot-signing-key-0123456789",
    "VERA_RETRIEVAL__MEMORY_SNAPSHOT_SECONDS": "0.5",
}


def _wait_for_log(stack: LaunchedStack, line: str, after: int, timeout: float = 60.0) -> None:
    """Waits for ``line`` in the stack's log past byte ``after``."""
    give_up = time.monotonic() + timeout
    while line.encode() not in stack.log_path.read_bytes()[after:]:
        assert time.monotonic() < give_up, stack.log_tail()
        time.sleep(0.2)


async def test_a_replica_without_a_snapshot_of_its_own_copies_the_writers(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with launch(data_dir, launch_env(data_dir, **SHARING)) as stack:
        facts = tmp_path / "ledger.jsonl"
        facts.write_text(json.dumps({
            "type": "fact", "subject": "ledger-service", "predicate": "written_in",
            "object": "Rust with the tokio runtime"}) + "\n")  # fmt: skip
        loaded = stack.vera("ingest", str(facts), "--project", "ledger", "--data-dir",
                            str(data_dir))  # fmt: skip
        assert loaded.returncode == 0, loaded.stderr
        _wait_for_log(stack, "memory snapshot published", after=0)
        assert stack.stop() == 0
        (data_dir / MEMORY_SNAPSHOT).unlink()  # what a new pod's emptyDir holds

        before = stack.log_path.stat().st_size
        stack.start()
        _wait_for_log(stack, "memory loaded from shared snapshot", after=before)
        async with stack.mcp_client() as client:
            result = await client.call_tool("knowledge_search", {
                "query": "what is ledger-service written in", "project": "ledger"})  # fmt: skip
        assert not result.is_error, result.content
        found = [r["object"] for r in result.structured_content["results"]]
        assert found[:1] == ["Rust with the tokio runtime"], found
