"""bench.console runs end to end on a small queue: the proposals are filed, the sign-in URL
signs in, and every timed request rendered the queue (it raises otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import console

pytestmark = pytest.mark.e2e


def test_console_bench_times_a_rendered_queue(
        capsys: pytest.CaptureFixture[str], records_in_tmp: Path) -> None:
    assert console.main(["--proposals", "60", "--requests", "3"]) == 0
    assert "60 pending, 3 requests: p50" in capsys.readouterr().out
    kept = json.loads((records_in_tmp / "console.json").read_text())
    assert kept["command"] == "scripts/bench console --proposals 60 --requests 3"
    assert kept["tables"][0]["rows"][0][1] == 3
