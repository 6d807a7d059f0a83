"""Drift: harvested facts whose cited lines no longer say what they said.

Each fact the last harvest loaded cites a file's lines and holds them as evidence. At a
later commit those lines are read again (git's object database, as a harvest reads): the
same text is no drift; other text is ``lines_changed``; a file that is gone, or shorter
than the range, is ``lines_vanished``. Nothing is written: this is `vera harvest
--check`, for CI.
"""

from __future__ import annotations

from typing import Any

from vera.harvest.changes import State
from vera.harvest.facts import parse_locator
from vera.harvest.git import Checkout
from vera.harvest.harvester import MAX_FILE_BYTES


def check(checkout: Checkout, revision: str, state: State) -> list[dict[str, Any]]:
    """One entry per drifted fact: its source, locator, statement and reason."""
    commit = checkout.commit(revision)
    paths = {k.path for k in state.facts}
    entries = {e.path: e for e in checkout.files(commit.id)
               if e.path in paths and e.size <= MAX_FILE_BYTES}
    lines: dict[str, list[str]] = {}
    for entry, content in checkout.read_blobs(entries.values()):
        lines[entry.path] = content.decode("utf-8", "replace").removeprefix(
            "\ufeff").splitlines()
    drift = []
    for known in state.facts:
        record = known.record
        span = parse_locator(str(record.get("locator", "")))
        if span is None:
            continue
        text = lines.get(known.path)
        if text is None or span[1] > len(text):
            reason = "lines_vanished"
        elif "\n".join(text[span[0] - 1:span[1]]) != record.get("evidence", ""):
            reason = "lines_changed"
        else:
            continue
        drift.append({"reason": reason, "source": record.get("source", ""),
                      "locator": record["locator"], "fact_key": known.fact_key,
                      "subject": record["subject"], "predicate": record["predicate"],
                      "object": record["object"], "commit": commit.id})
    return drift
