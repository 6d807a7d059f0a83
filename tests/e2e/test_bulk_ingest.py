"""A bulk load finishes against its own stack (issue 41, "bulk loads finish"): 30,000
records through `vera ingest` into an authenticated `vera up` with the default limits.

The REST API allows 300 requests a minute per key; indexing 30,000 facts takes longer
than the 30 s a command polling ten times a second lasted before it was refused with
``quota_exceeded``. The command paces its polls and honours ``Retry-After``
(``vera.api_client``), so it finishes and every fact is searchable when it returns. The
same path at 100,000 is ``scripts/bench bulk-ingest`` (bench/bulk_ingest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import bulk_ingest
from vera.stack.launcher import launch

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FACTS = 30_000


def test_thirty_thousand_records_load_through_vera_ingest_with_the_default_limits(
        tmp_path: Path) -> None:
    path, records = bulk_ingest.bulk_file(FACTS, tmp_path)
    assert records >= 30_000
    data_dir = tmp_path / "data"
    with launch(data_dir, bulk_ingest.team_env(data_dir), ready_timeout=300) as stack:
        key = bulk_ingest.administrator_key(stack)
        done = bulk_ingest.vera_ingest(stack, path, key, timeout=3600)
        assert done.returncode == 0, done.stderr[-3000:]
        # Exit 0: stored, and indexed (the command waits until retrieval caught up).
        assert json.loads(done.stdout)["facts"]["created"] == FACTS
