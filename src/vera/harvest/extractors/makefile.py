"""Makefiles (``Makefile``, ``makefile``, ``GNUmakefile``, ``*.mk``): the targets a
developer can run (``make test``), each with its rule and recipe as evidence.

Make has no maintained Python parser; a rule line is read as GNU make reads one (a target
list, a colon that is not an assignment's ``:=``). Special targets (``.PHONY``...),
pattern rules (``%.o: %.c``) and targets built from variables (``$(BIN):``) are not
commands anyone types and yield nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vera.harvest.facts import BUILD, Document, Fact

PREDICATES = frozenset({"defines_target"})

_NAME = r"[A-Za-z0-9_][\w./+-]*"
_RULE = re.compile(rf"^(?P<targets>{_NAME}(?:[ \t]+{_NAME})*)[ \t]*::?(?!=)")
MAX_RECIPE_LINES = 30


def wants(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in ("Makefile", "makefile", "GNUmakefile") or name.endswith(".mk")


def extract(doc: Document) -> Iterator[Fact]:
    lines = doc.lines
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        match = _RULE.match(line)
        if match is None or "=" in line[: match.end()]:
            continue
        end = number
        while end < len(lines) and end - number < MAX_RECIPE_LINES and lines[end].startswith("\t"):
            end += 1
        for target in match["targets"].split():
            if target not in seen:
                seen.add(target)
                yield doc.fact(doc.subject_for_file(), "defines_target", target, number, end,
                               slot=target, document_type=BUILD)
