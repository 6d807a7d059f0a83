"""`vera ingest`: validate a curated JSONL file whole, then load it into one project
through the REST API, as the calling curator.

The file is checked completely before anything is sent (``vera.ingest_records``); any bad
line rejects the file with its line number and reason. A fact may cite a source the file
defines or one an earlier file recorded in the project; a source neither has rejects the
file too, before anything is written. The records then travel in batches to
``POST /curation/projects/{project}/ingest`` (sources and entities first, then facts, then
corrections), and the command waits until retrieval has indexed them. Loading is
idempotent (re-ingesting creates nothing), so a load interrupted half-way is finished by
running it again.

The API and the API key are found as for `vera curate` (``vera.api_client``). Only the
project's curators may ingest into it; in local-dev the caller is the machine's
administrator, whose ingest creates a missing project. Exit codes: 0 loaded, 1 the API
could not be reached or indexing did not catch up, 2 the file or the call was refused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vera.api_client import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    ApiClient,
    ApiRefused,
    ClientStop,
    add_connection_arguments,
    open_client,
    poll_delays,
)
from vera.commands import Subcommands, settings_at
from vera.config import Settings
from vera.ingest_records import MAX_REPORTED_ERRORS, IngestFileError

# A batch stays well under the ingest route's body limit and record count.
BATCH_BYTES = 768 * 1024
BATCH_RECORDS = 1000
# Indexing a large load takes as long as it takes; the command gives up only when it
# stops moving for this long.
INDEX_STALL_SECONDS = 600.0
PROGRESS_FROM = 200  # short files finish before a bar would help
LISTED_KEYS = 50

ORDER = {"source": 0, "entity": 1, "fact": 2, "correction": 3}


def add_parser(commands: Subcommands) -> None:
    ingest = commands.add_parser("ingest", help="load curated knowledge from a JSONL file")
    ingest.add_argument("file", type=Path)
    ingest.add_argument("--project", required=True,
                        help="project slug (an administrator's ingest creates a missing one)")
    add_connection_arguments(ingest)
    ingest.add_argument("--json", action="store_true",
                        help="print the summary as JSON, every fact key included")


@dataclass
class Record:
    line: int
    value: dict[str, Any]
    size: int


@dataclass
class Summary:
    project_slug: str = ""
    counts: dict[str, list[int]] = field(default_factory=lambda: {
        "sources": [0, 0], "entities": [0, 0], "facts": [0, 0]})
    corrections: list[int] = field(default_factory=lambda: [0, 0])
    # (line, fact key) of every fact line, and of the replacement each correction made.
    fact_keys: list[tuple[int, str]] = field(default_factory=list)
    correction_keys: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project_slug,
            **{name: {"created": c, "deduplicated": d} for name, (c, d) in self.counts.items()},
            "corrections": {"applied": self.corrections[0],
                            "already_recorded": self.corrections[1]},
            "fact_keys": [{"line": line, "fact_key": key} for line, key in self.fact_keys],
            "correction_fact_keys": [{"line": line, "fact_key": key}
                                     for line, key in self.correction_keys],
            "warnings": [{"line": line, "warning": text} for line, text in self.warnings],
            "seconds": round(self.seconds, 3),
        }


def read_records(path: Path) -> tuple[list[Record], dict[str, list[int]]]:
    """The file's records in load order (sources, entities, facts, corrections; file order
    within each), each with its line, and the sources its facts cite without defining them
    (id -> lines); raises IngestFileError for any bad line."""
    from vera.ingest_records import parse_jsonl

    cited = parse_jsonl(path).cited_sources  # the whole file's verdict first: nothing sent
    records: list[Record] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                records.append(Record(number, json.loads(line), len(line.encode())))
    records.sort(key=lambda r: (ORDER[r.value["type"]], r.line))
    return records, cited


def batches(records: list[Record]) -> list[list[Record]]:
    out: list[list[Record]] = [[]]
    size = 0
    for record in records:
        if out[-1] and (size + record.size > BATCH_BYTES or len(out[-1]) >= BATCH_RECORDS):
            out.append([])
            size = 0
        out[-1].append(record)
        size += record.size
    return out


def _project_path(project: str) -> str:
    return f"/curation/projects/{quote(project, safe='')}"


def check_cited_sources(api: ApiClient, project: str, cited: dict[str, list[int]]) -> None:
    """Raises IngestFileError, before anything is written, for each line citing a source
    that neither the file defines nor the project already holds."""
    missing: list[tuple[int, str]] = []
    for source_id, lines in cited.items():
        try:
            api.call("GET", f"{_project_path(project)}/sources/{quote(source_id, safe='')}")
            continue
        except ApiRefused as refused:
            # An unknown source, or a project not created yet (an administrator's ingest
            # creates it): either way the project holds no such source.
            if refused.code not in ("invalid_input", "not_found", "project_out_of_scope"):
                raise
        missing += [(line, f"source: no source with id {source_id!r} in this file or "
                           f"project {project}") for line in lines]
    if missing:
        raise IngestFileError(sorted(missing)[:MAX_REPORTED_ERRORS])


# A refused record as the API names it: ``records[3].subject``.
_REFUSED_RECORD = re.compile(r"^records\[(?P<index>\d+)\]\.?(?P<field>.*)$")


def load(api: ApiClient, project: str, records: list[Record],
         progress: Callable[[str, int, int], None]) -> Summary:
    """Sends the records, then waits until retrieval has indexed them."""
    started = time.monotonic()
    summary, position = send(api, project, records, progress)
    wait_until_indexed(api, project, position, progress)
    summary.seconds = time.monotonic() - started
    return summary


def send(api: ApiClient, project: str, records: list[Record],
         progress: Callable[[str, int, int], None]) -> tuple[Summary, int]:
    """Sends the records in batches within the route's bounds: the summary so far and
    the change-log position the last batch reached."""
    summary = Summary(project_slug=project)
    position = 0
    done = 0
    for batch in batches(records):
        try:
            reply = api.call("POST", f"{_project_path(project)}/ingest",
                             json={"records": [r.value for r in batch]})
        except ApiRefused as refused:
            record = _REFUSED_RECORD.match(str(refused.error.get("field", "")))
            if refused.code != "invalid_input" or record is None \
                    or int(record["index"]) >= len(batch):
                raise
            line = batch[int(record["index"])].line
            detail = str(refused.error.get("detail") or
                         f"{record['field'] or 'record'}: {refused.error.get('reason')}")
            if done == 0:
                raise IngestFileError([(line, detail)]) from None
            raise ClientStop(
                f"line {line}: {detail}; the {done} record(s) before its batch were loaded "
                "(fix the file and run it again: loading is idempotent)", EXIT_REFUSED
            ) from None
        summary.project_slug = reply["project_slug"]
        for name, pair in summary.counts.items():
            pair[0] += reply[name]["created"]
            pair[1] += reply[name]["deduplicated"]
        summary.corrections[0] += reply["corrections"]["applied"]
        summary.corrections[1] += reply["corrections"]["already_recorded"]
        fact_lines = [r.line for r in batch if r.value["type"] == "fact"]
        summary.fact_keys += list(zip(fact_lines, reply["fact_keys"], strict=True))
        correction_lines = [r.line for r in batch if r.value["type"] == "correction"]
        summary.correction_keys += list(
            zip(correction_lines, reply["correction_fact_keys"], strict=True))
        for warning in reply["warnings"]:
            line = batch[warning["record"]].line if warning["record"] is not None else 0
            summary.warnings.append(
                (line, f"{warning['field']}: {warning['reason']} {warning['codepoint']}"))
        position = max(position, reply["change_position"])
        done += len(batch)
        progress("load", done, len(records))
    return summary, position


def wait_until_indexed(api: ApiClient, project: str, position: int,
                       progress: Callable[[str, int, int], None],
                       stall: float = INDEX_STALL_SECONDS) -> None:
    """Polls the project's index status, paced (``poll_delays``), until it reaches
    ``position``; ClientStop when it has not moved for ``stall`` seconds."""
    path = f"{_project_path(project)}/index-status"
    indexed = api.call("GET", path)["indexed_position"]
    start = min(indexed, position)
    delays = poll_delays()
    moved = time.monotonic()
    while indexed < position:
        progress("index", indexed - start, position - start)
        if time.monotonic() - moved > stall:
            raise ClientStop(
                f"facts were stored but indexing has not moved for {stall:.0f} s; "
                "they become searchable when the retrieval service catches up",
                EXIT_UNREACHABLE)
        api.sleep(next(delays))
        now = api.call("GET", path)["indexed_position"]
        if now > indexed:
            moved = time.monotonic()
        indexed = now
    progress("index", position - start, position - start)


def _print_summary(summary: Summary) -> None:
    (sc, sd), (ec, ed), (fc, fd) = (summary.counts[n] for n in ("sources", "entities", "facts"))
    print(f"project {summary.project_slug}\n"
          f"  facts:    {fc} created, {fd} deduplicated\n"
          f"  sources:  {sc} created, {sd} deduplicated\n"
          f"  entities: {ec} created, {ed} deduplicated\n"
          + (f"  corrections: {summary.corrections[0]} applied,"
             f" {summary.corrections[1]} already recorded\n" if any(summary.corrections) else "")
          + f"all facts searchable after {summary.seconds:.1f} s")
    keys = summary.fact_keys + summary.correction_keys
    if keys:
        # A curator writing a correction line needs the key of the fact it corrects.
        print("fact keys (line: key):")
        for line, key in sorted(keys)[:LISTED_KEYS]:
            print(f"  {line}: {key}")
        if len(keys) > LISTED_KEYS:
            print(f"  ... and {len(keys) - LISTED_KEYS} more (--json lists every key)")
    for line, warning in summary.warnings:
        print(f"  flagged: {f'line {line}: ' if line else ''}{warning}")


def run(args: argparse.Namespace, settings: Settings, transport: Any = None) -> int:
    from tqdm import tqdm

    if not args.file.is_file():
        print(f"vera ingest: {args.file}: no such file", file=sys.stderr)
        return EXIT_REFUSED
    bars: dict[str, tqdm] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if total < PROGRESS_FROM:
            return
        bar = bars.get(stage)
        if bar is None:
            label = "loading records" if stage == "load" else "indexing"
            bar = bars[stage] = tqdm(total=total, desc=label, unit="record", file=sys.stderr)
        bar.total = total
        bar.update(done - bar.n)

    try:
        records, cited = read_records(args.file)
        with open_client(args, settings, transport) as api:
            check_cited_sources(api, args.project, cited)
            summary = load(api, args.project, records, progress)
    except IngestFileError as exc:
        print(f"vera ingest: {args.file} rejected, nothing was written:", file=sys.stderr)
        for line, reason in exc.errors:
            print(f"  line {line}: {reason}", file=sys.stderr)
        return EXIT_REFUSED
    except ClientStop as stop:
        print(f"vera ingest: {stop.message}", file=sys.stderr)
        return stop.exit_code
    except ApiRefused as refused:
        print(f"vera ingest: project {args.project}: {refused.describe()}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        for bar in bars.values():
            bar.close()
    if args.json:
        print(json.dumps(summary.as_json(), indent=2))
    else:
        _print_summary(summary)
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    return run(args, settings_at(args.data_dir))
