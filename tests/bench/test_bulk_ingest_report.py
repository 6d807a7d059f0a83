"""The bulk-ingest bench's report is made after its (long) run, so a fault there loses the
run: it names the bench, the date to the second and the machine."""

from __future__ import annotations

import datetime as dt

from bench import bulk_ingest


def test_the_report_names_the_bench_its_date_and_machine() -> None:
    report = bulk_ingest.report_of({"facts": 3, "exit_code": 0})
    assert report["bench"] == "bulk-ingest" and report["result"] == {"facts": 3, "exit_code": 0}
    when = dt.datetime.fromisoformat(report["date"])
    assert when.tzinfo is not None and when.microsecond == 0
    assert report["machine"]["cpu_count"] >= 1
