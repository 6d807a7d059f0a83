"""CODEOWNERS (GitHub's and GitLab's locations): who owns which paths.

One fact per rule line: ``<repository>:<pattern> owned_by <owners as written>``. A rule
without owners (which un-assigns a path) and GitLab's ``[Section]`` headers state no owner
and yield nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from vera.harvest.facts import OWNERSHIP, Document, Fact

PREDICATES = frozenset({"owned_by"})

PATHS = frozenset({"CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS",
                   ".gitlab/CODEOWNERS"})


def wants(path: str) -> bool:
    return path in PATHS


def extract(doc: Document) -> Iterator[Fact]:
    for number, line in enumerate(doc.lines, start=1):
        text = line.split(" #", 1)[0].strip()
        if not text or text.startswith(("#", "[", "^[")):
            continue
        pattern, *owners = text.split()
        if not owners:
            continue
        yield doc.fact(f"{doc.repository}:{pattern}", "owned_by", " ".join(owners), number,
                       slot=pattern, document_type=OWNERSHIP, quote=owners[0])
