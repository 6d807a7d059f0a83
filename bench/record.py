"""A bench's record: what docs/benchmarks.md shows of its latest run, as data.

Every ``scripts/bench NAME`` run ends by writing ``bench/records/NAME.json``: the command that
reproduces it, the date, the machine, the wall time and its figures as the bench prints them
(medians, and ratios against the baseline run in the same process), as tables whose numeric
cells stay numbers. ``scripts/gen-bench-docs`` renders the page from these files alone, and
``tests/bench/test_bench_docs.py`` fails when the page differs or a bench has none. The JSON
report a bench writes under ``bench-results/`` keeps the per-question detail; a record does not.
A record seeded from the page before benches wrote records says so in ``source``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "bench" / "records"
MACHINE_KEYS = ("cpu_model", "machine", "cpu_count")
NUMBER = re.compile(r"^-?\d+(?:\.(\d+))?$")


def machine_info() -> dict:
    info = {"platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor() or None, "cpu_count": os.cpu_count(),
            "python": platform.python_version()}
    try:
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
          digits: Sequence[int | None] | None = None, title: str = "") -> dict[str, Any]:
    """One table of figures. A number in a column with ``digits`` is shown with that many
    decimals; any other cell as it is. ``title`` is the sentence shown above it."""
    width = len(columns)
    if any(len(row) != width for row in rows):
        raise ValueError(f"table: every row needs {width} cells ({list(columns)})")
    if digits is not None and len(digits) != width:
        raise ValueError(f"table: digits needs {width} entries")
    return {"title": title, "columns": list(columns),
            "digits": list(digits) if digits is not None else [None] * width,
            "rows": [list(row) for row in rows]}


def from_cells(rows: Sequence[Sequence[str]], *, title: str = "") -> dict[str, Any]:
    """A table the bench prints as text (its first row the header): a column whose plain
    numbers share one number of decimals keeps them as numbers with those digits; any
    other cell stays the text printed."""
    head, body = list(rows[0]), [[str(c) for c in row] for row in rows[1:]]
    digits: list[int | None] = []
    for column in range(len(head)):
        found = {len(m.group(1) or "") for row in body if (m := NUMBER.match(row[column]))}
        digits.append(found.pop() if len(found) == 1 else None)
    typed = [[(float(c) if digits[n] else int(c)) if digits[n] is not None and NUMBER.match(c)
              else c for n, c in enumerate(row)] for row in body]
    return table(head, typed, digits=digits, title=title)


def from_markdown(text: str, *, title: str = "") -> dict[str, Any]:
    """A table the bench prints as markdown (bench.harness.render_table's, or by hand)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines()
            if line.strip().startswith("|") and not set(line.strip()) <= set("|-: ")]
    return from_cells(rows, title=title)


def cell(value: Any, digits: int | None) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    return str(value) if digits is None else f"{value:.{digits}f}"


def as_markdown(figures: dict[str, Any]) -> list[str]:
    """A table as the bench prints it and as scripts/gen-bench-docs renders it."""
    head = figures["columns"]
    return [
        *([figures["title"], ""] if figures.get("title") else []),
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(cell(v, d) for v, d in zip(row, figures["digits"], strict=True))
          + " |" for row in figures["rows"]),
    ]


def save(name: str, record: dict[str, Any], directory: Path | None = None) -> Path:
    """Writes ``NAME.json`` under ``directory``, else VERA_BENCH_RECORDS (a test running a
    bench in a child process points it at its own folder), else bench/records/."""
    if directory is None:
        directory = Path(os.environ.get("VERA_BENCH_RECORDS") or RECORDS)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(dumps(record))
    return path


def dumps(record: dict[str, Any]) -> str:
    """The record as JSON, a table's header and each of its rows on one line (a diff of two
    runs then reads row by row)."""
    if "tables" not in record:
        return json.dumps(record, indent=1, ensure_ascii=False) + "\n"

    def line(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    tables = ",\n".join(
        "  {\"title\": " + line(figures["title"]) + ",\n   \"columns\": " + line(figures["columns"])
        + ",\n   \"digits\": " + line(figures["digits"]) + ",\n   \"rows\": ["
        + ",".join("\n    " + line(row) for row in figures["rows"]) + "]}"
        for figures in record["tables"])
    head = json.dumps({k: v for k, v in record.items() if k != "tables"}, indent=1,
                      ensure_ascii=False)
    return head[:-2] + ',\n "tables": [\n' + tables + "\n ]\n}\n"


def write(name: str, argv: Sequence[str], tables: Sequence[dict[str, Any]], *,
          wall_s: float | None = None, study: str | None = None,
          directory: Path | None = None) -> Path:
    """Keeps this run of ``scripts/bench NAME ARGV`` as the bench's latest record, or as the
    latest of one of its studies (``study``: the record's file, e.g. ``load-soak``)."""
    machine = machine_info()
    record = {
        "bench": name,
        "command": " ".join(["scripts/bench", name, *argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {key: machine.get(key) for key in MACHINE_KEYS},
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "tables": list(tables),
    }
    return save(study or name, record, directory)
