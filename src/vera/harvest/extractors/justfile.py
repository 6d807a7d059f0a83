"""justfiles (``justfile``, ``Justfile``, ``.justfile``): the recipes ``just`` runs, each
with its header and body as evidence. Read line by line as ``just`` reads a recipe header
(a name, optional parameters, a colon that is not ``:=``); ``just`` has no Python parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vera.harvest.facts import BUILD, Document, Fact

PREDICATES = frozenset({"defines_target"})

_RECIPE = re.compile(r"^@?(?P<name>[A-Za-z_][\w-]*)(?:[ \t]+[^:=]*)?:(?!=)")
MAX_BODY_LINES = 30


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] in ("justfile", "Justfile", ".justfile")


def extract(doc: Document) -> Iterator[Fact]:
    lines = doc.lines
    for number, line in enumerate(lines, start=1):
        match = _RECIPE.match(line)
        if match is None or match["name"] in ("set", "alias", "export", "import", "mod"):
            continue
        end = number
        while end < len(lines) and end - number < MAX_BODY_LINES \
                and lines[end][:1] in (" ", "\t") and lines[end].strip():
            end += 1
        yield doc.fact(doc.subject_for_file(), "defines_target", match["name"], number, end,
                       slot=match["name"], document_type=BUILD)
