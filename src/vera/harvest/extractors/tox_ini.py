"""``tox.ini``: the environments tox runs (``[testenv:lint]``), read with ``configparser``
as tox reads the file, each cited by its section.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterator

from vera.harvest.facts import BUILD, Document, Fact
from vera.harvest.locate import find_line

PREDICATES = frozenset({"defines_session"})

MAX_SECTION_LINES = 30


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "tox.ini"


def extract(doc: Document) -> Iterator[Fact]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(doc.text)
    except configparser.Error:
        return
    for section in parser.sections():
        if not section.startswith("testenv:"):
            continue
        name = section.removeprefix("testenv:").strip()
        line = find_line(doc.lines, re.compile(rf"^\s*\[{re.escape(section)}\]"))
        if not name or line is None:
            continue
        end = line
        while end < len(doc.lines) and end - line < MAX_SECTION_LINES \
                and not doc.lines[end].lstrip().startswith("["):
            end += 1
        while end > line and not doc.lines[end - 1].strip():
            end -= 1
        yield doc.fact(doc.subject_for_file(), "defines_session", f"tox -e {name}", line, end,
                       slot=name, document_type=BUILD, quote=name)
