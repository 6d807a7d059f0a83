"""Architecture decision records in the two common formats, under the usual folders
(``doc[s]/adr``, ``doc[s]/decisions``, ``docs/architecture/decisions``, ``adr``,
``decisions``; Markdown files other than README, index and template):

- Nygard: ``# 1. Title``, ``Date:``, ``## Status`` (its first line), ``## Decision`` (its
  first paragraph);
- MADR: a title, the status from front matter (``status:``), a ``* Status:`` bullet or a
  ``## Status`` section, and ``Chosen option: "…"``.

The subject is the decision's title as written. Facts: ``documented_in`` (the file),
``status`` (the status line's first word: Accepted, Proposed, Superseded...),
``decided`` (the chosen option or the decision paragraph) and, when the status says
"superseded by" a link to another record, ``superseded_by`` that record. The decision of a
superseded record stops being valid: its ``valid_to`` is the date the record states for
itself when it has none later, else the harvested commit's time (``until_commit``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime

from vera.harvest.facts import DECISION, Document, Fact
from vera.limits import PREDICATE_OBJECT

PREDICATES = frozenset({"documented_in", "status", "decided", "superseded_by"})

_FOLDER = re.compile(r"(^|/)(docs?/(architecture/)?)?(adrs?|decisions|decision-records)/[^/]+\.md$",
                     re.IGNORECASE)
_SKIP = re.compile(r"^(readme|index|template|adr-template|0000-template)\.md$", re.IGNORECASE)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_STATUS_BULLET = re.compile(r"^\s*[*-]\s*Status:\s*(?P<value>.+)$", re.IGNORECASE)
_DATE = re.compile(r"^\s*(?:[*-]\s*)?Date:\s*(?P<value>\d{4}-\d{2}-\d{2})", re.IGNORECASE)
_CHOSEN = re.compile(r"Chosen option:\s*\"(?P<value>[^\"]+)\"", re.IGNORECASE)
_WORD = re.compile(r"^[\s*_`\[]*(?P<word>[A-Za-z][A-Za-z-]*)")
_LINK = re.compile(r"\]\((?P<target>[^)\s]+\.md)(?:#[^)]*)?\)")


def wants(path: str) -> bool:
    return bool(_FOLDER.search(path)) and not _SKIP.match(path.rsplit("/", 1)[-1])


def _front_matter(lines: list[str]) -> dict[str, tuple[str, int]]:
    if not lines or lines[0].strip() != "---":
        return {}
    out: dict[str, tuple[str, int]] = {}
    for number in range(2, min(len(lines), 40) + 1):
        text = lines[number - 1]
        if text.strip() == "---":
            break
        key, sep, value = text.partition(":")
        if sep and key.strip() and not key.startswith(" "):
            out[key.strip().lower()] = (value.strip().strip("\"'"), number)
    return out


def _section(lines: list[str], title: str) -> tuple[int, int] | None:
    """The first paragraph (non-empty lines) under the heading ``title``."""
    for number, line in enumerate(lines, start=1):
        heading = _HEADING.match(line)
        if heading and heading.group(2).strip().lower() == title:
            start = number + 1
            while start <= len(lines) and not lines[start - 1].strip():
                start += 1
            if start > len(lines) or _HEADING.match(lines[start - 1]):
                return None
            end = start
            while end < len(lines) and lines[end].strip() and not _HEADING.match(lines[end]):
                end += 1
            return start, end
    return None


def _parse_date(text: str) -> datetime | None:
    try:
        return datetime.combine(date.fromisoformat(text[:10]), datetime.min.time(), UTC)
    except ValueError:
        return None


def extract(doc: Document) -> Iterator[Fact]:
    lines = doc.lines
    front = _front_matter(lines)
    title_line = next((n for n, line in enumerate(lines, start=1)
                       if (h := _HEADING.match(line)) and len(h.group(1)) == 1), None)
    if title_line is None:
        return
    title = _HEADING.match(lines[title_line - 1]).group(2)  # type: ignore[union-attr]
    if not title:
        return
    yield doc.fact(title, "documented_in", doc.subject_for_file(), title_line,
                   slot="documented_in", document_type=DECISION, quote=title)

    own_date = None
    if "date" in front:
        own_date = _parse_date(front["date"][0])
    else:
        dated = next((m for line in lines[:40] if (m := _DATE.match(line))), None)
        own_date = _parse_date(dated["value"]) if dated else None

    status: tuple[str, int] | None = front.get("status")
    if status is None:
        bullet = next(((m["value"], n) for n, line in enumerate(lines, start=1)
                       if (m := _STATUS_BULLET.match(line))), None)
        section = _section(lines, "status")
        status = bullet or ((lines[section[0] - 1].strip(), section[0]) if section else None)
    superseded = False
    if status is not None:
        text, line = status
        word = _WORD.match(text)
        if word:
            yield doc.fact(title, "status", word["word"].capitalize(), line, slot="status",
                           document_type=DECISION, quote=word["word"])
            superseded = word["word"].lower() == "superseded"
        link = _LINK.search(lines[line - 1])
        if superseded and link:
            target = posixpath.normpath(posixpath.join(doc.directory, link["target"]))
            if not target.startswith(".."):
                yield doc.fact(title, "superseded_by", f"{doc.repository}/{target}", line,
                               slot="superseded_by", document_type=DECISION,
                               quote=link["target"])

    chosen = next(((m["value"], n) for n, line in enumerate(lines, start=1)
                   if (m := _CHOSEN.search(line))), None)
    decision: tuple[str, int, int] | None = None
    if chosen is not None:
        decision = (chosen[0], chosen[1], chosen[1])
    elif (section := _section(lines, "decision")) is not None:
        paragraph = " ".join(line.strip() for line in lines[section[0] - 1:section[1]])
        decision = (paragraph, section[0], section[1])
    if decision is not None and len(decision[0]) <= PREDICATE_OBJECT[1]:
        text, start, end = decision
        quote = text if chosen is not None else lines[start - 1].strip()
        if superseded:
            yield doc.fact(title, "decided", text, start, end, slot="decided",
                           document_type=DECISION, quote=quote, valid_from=own_date,
                           until_commit=True)
        else:
            yield doc.fact(title, "decided", text, start, end, slot="decided",
                           document_type=DECISION, quote=quote, valid_from=own_date)
