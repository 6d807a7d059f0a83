"""One harvest loaded into a project through the REST API's ingest route.

The harvest is compared with the last one loaded (``vera.harvest.changes``), turned into
ingest records (``vera.harvest.records``: sources, new and unchanged facts, corrections
for changed ones, validity-closing corrections for vanished ones) and loaded in batches
by `vera ingest`'s loader, which stays within the route's bounds. The state is saved
only when everything was loaded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from vera.api_client import ApiClient
from vera.harvest import changes
from vera.harvest.harvester import Harvest
from vera.harvest.records import fact_record, source_id, source_record


def build_records(harvest: Harvest, plan: changes.Plan, trust_tier: int | None
                  ) -> tuple[list[dict[str, Any]], list[tuple[str, str, dict[str, Any]]]]:
    """The records to load, and for each fact or correction record the (path, slot) and
    record it stands for in the next state (vanished facts stand for none)."""
    committed_at = harvest.commit.committed_at
    when = committed_at.isoformat()
    commit = harvest.commit.id
    paths = sorted({f.path for f in harvest.facts})
    records: list[dict[str, Any]] = [
        source_record(harvest.repository, commit, committed_at, path) for path in paths]
    kept: list[tuple[str, str, dict[str, Any]]] = []
    changed = {id(fact): old for old, fact in plan.changed}
    for fact in harvest.facts:
        record = fact_record(fact, harvest.repository, harvest.branch, committed_at, trust_tier)
        if record is None:
            harvest.skipped["undated_superseded"] += 1
            continue
        old = changed.get(id(fact))
        if old is not None:
            record = {**record, "type": "correction", "corrects": old.fact_key,
                      "reason": f"{fact.path} states another value at {commit}"}
        records.append(record)
        kept.append((fact.path, fact.slot, record))
    for old in plan.vanished:
        # The file no longer says it: the fact held from its start until this commit.
        closed = {**old.record, "type": "correction", "corrects": old.fact_key,
                  "valid_to": when, "reason": f"{old.path} no longer states it at {commit}"}
        if closed.get("valid_from", "") >= when:
            closed.pop("valid_from", None)
        records.append(closed)
    return records, kept


def load_harvest(api: ApiClient, project: str, harvest: Harvest, state_file: Path,
                 trust_tier: int | None = None, progress_from: int = 200) -> dict[str, Any]:
    from tqdm import tqdm

    from vera.commands.ingest import Record, load

    previous = changes.load_state(state_file)
    plan = changes.plan(previous, harvest.facts)
    values, kept = build_records(harvest, plan, trust_tier)
    records = [Record(index, value, len(json.dumps(value).encode()))
               for index, value in enumerate(values)]
    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if total < progress_from:
            return
        bar = bars.get(stage)
        if bar is None:
            label = "loading facts" if stage == "load" else "indexing"
            bar = bars[stage] = tqdm(total=total, desc=label, unit="record", file=sys.stderr)
        bar.total = total
        bar.update(done - bar.n)

    try:
        summary = load(api, project, records, progress)
    finally:
        for bar in bars.values():
            bar.close()
    keys = dict(summary.fact_keys) | dict(summary.correction_keys)
    index_of = {id(record.value): record.line for record in records}
    state = changes.State(
        commit=harvest.commit.id, committed_at=harvest.commit.committed_at.isoformat(),
        facts=[changes.Known(path, slot, keys[index_of[id(record)]],
                             {k: v for k, v in record.items()
                              if k not in ("type", "corrects", "reason")} | {"type": "fact"})
               for path, slot, record in kept])
    changes.save_state(state_file, state)
    return {
        "commit": harvest.commit.id, "committed_at": harvest.commit.committed_at.isoformat(),
        "files_listed": harvest.files_listed, "files_read": harvest.files_read,
        "facts": len(kept), "skipped": dict(harvest.skipped), "seconds": harvest.seconds,
        "plan": {"new": len(plan.new), "unchanged": len(plan.unchanged),
                 "changed": len(plan.changed), "vanished": len(plan.vanished)},
        "sources": {"created": summary.counts["sources"][0],
                    "deduplicated": summary.counts["sources"][1]},
        "loaded": {"created": summary.counts["facts"][0],
                   "deduplicated": summary.counts["facts"][1],
                   "corrections_applied": summary.corrections[0],
                   "corrections_already_recorded": summary.corrections[1]},
        "source_ids": sorted({source_id(harvest.repository, p) for p, _, _ in kept}),
    }


# A proposals request stays under the REST API's plain body limit (16 KiB).
PROPOSAL_BATCH_BYTES = 14 * 1024


def proposal_batches(harvest: Harvest) -> list[list[dict[str, Any]]]:
    """The harvest as proposal requests: each file's facts after its source, whole files
    packed into a request while they fit, a larger file's facts spread over several (its
    source repeated in each)."""
    committed_at = harvest.commit.committed_at
    by_path: dict[str, list[dict[str, Any]]] = {}
    for fact in harvest.facts:
        record = fact_record(fact, harvest.repository, harvest.branch, committed_at)
        if record is None:
            harvest.skipped["undated_superseded"] += 1
            continue
        by_path.setdefault(fact.path, []).append(record)
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for path, records in sorted(by_path.items()):
        source = source_record(harvest.repository, harvest.commit.id, committed_at, path)
        source_size = len(json.dumps(source)) + 2
        if current and size + source_size + len(json.dumps(records[0])) > PROPOSAL_BATCH_BYTES:
            batches.append(current)
            current, size = [], 0
        current.append(source)
        size += source_size
        for record in records:
            record_size = len(json.dumps(record)) + 2
            if size + record_size > PROPOSAL_BATCH_BYTES:
                batches.append(current)
                current, size = [source], source_size
            current.append(record)
            size += record_size
    if current:
        batches.append(current)
    return batches


def propose_harvest(api: ApiClient, project: str, harvest: Harvest,
                    progress_from: int = 200) -> dict[str, Any]:
    """Files the harvest as proposals for the project's curators (members may)."""
    from urllib.parse import quote

    from tqdm import tqdm

    batches = proposal_batches(harvest)
    total = sum(len(b) for b in batches)
    created = deduplicated = 0
    unknown: set[str] = set()
    bar = tqdm(total=total, desc="filing proposals", unit="record", file=sys.stderr,
               disable=total < progress_from)
    try:
        for batch in batches:
            reply = api.call("POST", f"/projects/{quote(project, safe='')}/proposals",
                             json={"records": batch})
            created += reply["created"]
            deduplicated += reply["deduplicated"]
            unknown.update(reply["unknown_predicates"])
            bar.update(len(batch))
    finally:
        bar.close()
    kept = sum(1 for b in batches for r in b if r["type"] == "fact")
    return {
        "commit": harvest.commit.id, "committed_at": harvest.commit.committed_at.isoformat(),
        "files_listed": harvest.files_listed, "files_read": harvest.files_read,
        "facts": kept, "skipped": dict(harvest.skipped), "seconds": harvest.seconds,
        "proposed": {"created": created, "deduplicated": deduplicated},
        "missing_predicates": sorted(unknown),
    }
