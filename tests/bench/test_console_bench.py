"""bench.console runs end to end on a small queue: the proposals are filed, the sign-in URL
signs in, and every timed request rendered the queue (it raises otherwise)."""

from __future__ import annotations

import pytest

from bench import console

pytestmark = pytest.mark.e2e


def test_console_bench_times_a_rendered_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert console.main(["--proposals", "60", "--requests", "3"]) == 0
    assert "60 pending, 3 requests: p50" in capsys.readouterr().out
