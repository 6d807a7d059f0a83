"""Drift: harvested facts whose cited lines no longer say what they said.

Each fact the last harvest loaded cites a file's lines and holds them as evidence. At a
later commit those lines are read again (git's object database, as a harvest reads): the
same text is no drift; other text is ``lines_changed``; a file that is gone, or shorter
than the range, is ``lines_vanished``. ``check`` writes
nothing (`vera harvest --check`, for CI); ``mark_drift`` records the comparison on the
project's citations of the repository's files (a publishing harvest, curators only).
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
    files = lines_at(checkout, commit.id, {k.path for k in state.facts})
    drift = []
    for known in state.facts:
        record = known.record
        reason = drift_reason(files.get(known.path), str(record.get("locator", "")),
                              str(record.get("evidence", "")))
        if not reason:
            continue
        drift.append({"reason": reason, "source": record.get("source", ""),
                      "locator": record["locator"], "fact_key": known.fact_key,
                      "subject": record["subject"], "predicate": record["predicate"],
                      "object": record["object"], "commit": commit.id})
    return drift


MARKS_PER_REQUEST = 50  # well under the REST API's plain body limit


def lines_at(checkout: Checkout, commit: str, paths: set[str]) -> dict[str, list[str]]:
    """Each path's lines at the commit (a path gone or too large is absent)."""
    cited = [e for e in checkout.files(commit) if e.path in paths]
    sizes = checkout.sizes(cited)
    entries = [e for e in cited if sizes[e.object_id] <= MAX_FILE_BYTES]
    return {entry.path: content.decode("utf-8", "replace").removeprefix("\ufeff").splitlines()
            for entry, content in checkout.read_blobs(entries)}


def drift_reason(lines: list[str] | None, locator: str, evidence: str) -> str | None:
    """lines_changed / lines_vanished, "" when the lines still say it, None when the
    locator names no line range (nothing to compare)."""
    span = parse_locator(locator)
    if span is None:
        return None
    if lines is None or span[1] > len(lines):
        return "lines_vanished"
    return "" if "\n".join(lines[span[0] - 1:span[1]]) == evidence else "lines_changed"


def mark_drift(api: Any, project: str, checkout: Checkout, commit: str, repository: str
               ) -> dict[str, int]:
    """Compares every line range the project's facts cite from this repository's files
    (harvested or hand-written with a locator) with the commit, and records the result
    (``POST /curation/projects/{project}/drift``): drifted citations marked, marks on
    lines that say it again cleared. Curators only."""
    from urllib.parse import quote

    base = f"/curation/projects/{quote(project, safe='')}"
    prefix = f"{repository}/"
    cited: list[dict[str, Any]] = []
    token = ""
    while True:
        page = api.call("GET", f"{base}/cited-lines", params={
            "source_id_prefix": prefix, "page_size": 1000, "page_token": token})
        cited += page["cited"]
        token = page["next_page_token"] or ""
        if not token:
            break
    files = lines_at(checkout, commit, {c["source_id"][len(prefix):] for c in cited})
    marks = []
    for c in cited:
        reason = drift_reason(files.get(c["source_id"][len(prefix):]), c["locator"],
                              c["evidence"])
        if reason is None or reason == (c["drift_reason"] or ""):
            continue
        marks.append({"fact_key": c["fact_key"], "source_id": c["source_id"],
                      "reason": reason or None})
    marked = cleared = 0
    for start in range(0, len(marks), MARKS_PER_REQUEST):
        reply = api.call("POST", f"{base}/drift", json={
            "commit": commit, "drift": marks[start:start + MARKS_PER_REQUEST]})
        marked += reply["marked"]
        cleared += reply["cleared"]
    return {"cited": len(cited), "marked": marked, "cleared": cleared}
