"""``requirements*.txt`` (and ``requirements/*.txt``): pip requirement lines, each parsed
by ``packaging``'s PEP 508 parser.

One ``depends_on`` per requirement, the requirement as written, for the file's folder of
the repository. Options (``-r``, ``-c``, ``-e``, ``--index-url``...), bare paths and URLs
name no package by themselves and yield nothing; a ``\\`` continuation joins lines and
the fact cites all of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from packaging.requirements import InvalidRequirement, Requirement

from vera.harvest.facts import Document, Fact
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({"depends_on", "built_with", "uses_database_driver", "uses_test_runner"})


def wants(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    parent = path.rsplit("/", 2)[-2] if path.count("/") else ""
    return name.endswith(".txt") and (name.startswith("requirements") or parent == "requirements")


def extract(doc: Document) -> Iterator[Fact]:
    subject = doc.subject_for_directory()
    start, pending = 0, ""
    for number, line in enumerate(doc.lines, start=1):
        if not pending:
            start = number
        text = line.split(" #", 1)[0].split("\t#", 1)[0]
        if text.lstrip().startswith("#"):
            text = ""
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        logical, pending = (pending + text).strip(), ""
        # Per-requirement options (--hash=...) follow the requirement.
        requirement_text = logical.split(" --", 1)[0].strip()
        if not requirement_text or requirement_text.startswith("-"):
            continue
        try:
            requirement = Requirement(requirement_text)
        except InvalidRequirement:
            continue
        yield from dependency_facts(doc, subject, "python", requirement.name, requirement_text,
                                    start, number)
