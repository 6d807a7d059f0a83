"""The one fact type every extractor yields, and the document it reads.

A harvested fact states one thing one file says, with where it says it: the file's path
and the exact line range. The harvest (``vera.harvest.harvester``) copies those lines as
the fact's evidence, screens them for credentials, and drops any fact whose evidence does
not hold its ``quote`` (the text of the file the object was read from; the object itself
unless the extractor says otherwise), so a fact can never cite lines that do not say it.

``slot`` names what the fact is about inside its file independently of its value (the
dependency ``fastapi`` of ``pyproject.toml``, the ``test`` target of a Makefile): a later
commit that says something else in the same slot corrects the fact rather than adding a
second one (``vera.harvest.changes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from posixpath import dirname

# Document types: which family of statement a fact is (a retrieval filter, docs/harvest.md).
OWNERSHIP = "ownership"
RUNTIME = "runtime"
DEPENDENCIES = "dependencies"
INFRASTRUCTURE = "infrastructure"
BUILD = "build"
DECISION = "decision"
INTERFACE = "interface"
LICENSE = "license"


@dataclass(frozen=True)
class Document:
    """One file of the repository at the harvested commit, decoded as UTF-8."""

    repository: str  # canonical identity, e.g. github.com/acme/payments
    path: str  # repository-relative, "/"-separated
    text: str

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def directory(self) -> str:
        return dirname(self.path)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def subject_for_directory(self) -> str:
        """The repository, or the folder of it, this file describes when it names nothing
        itself (a requirements file, a .nvmrc)."""
        return f"{self.repository}/{self.directory}" if self.directory else self.repository

    def subject_for_item(self, item: str) -> str:
        """Something the file itself declares: a compose service, a CI job, a resource."""
        return f"{self.repository}/{self.path}#{item}"

    def subject_for_file(self) -> str:
        return f"{self.repository}/{self.path}"

    def fact(self, subject: str, predicate: str, object_: str, start: int, end: int | None = None,
             *, slot: str, document_type: str, quote: str | None = None,
             valid_from: datetime | None = None, until_commit: bool = False) -> Fact:
        return Fact(subject=subject, predicate=predicate, object=object_, path=self.path,
                    start=start, end=start if end is None else end, slot=slot,
                    document_type=document_type, valid_from=valid_from,
                    until_commit=until_commit, quote=object_ if quote is None else quote)


@dataclass(frozen=True)
class Fact:
    subject: str
    predicate: str
    object: str
    path: str
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    slot: str
    document_type: str
    # Only when the file itself dates the statement (an ADR's own date); otherwise the
    # harvest uses the commit's time.
    valid_from: datetime | None = None
    # The file says the statement no longer holds (a superseded decision): valid until the
    # harvested commit, from its own date if it has one.
    until_commit: bool = False
    quote: str = field(default="", compare=False)
    evidence: str = field(default="", compare=False)

    @property
    def locator(self) -> str:
        return f"L{self.start}" if self.start == self.end else f"L{self.start}-L{self.end}"

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What stays the same when the file changes the value: the file, the subject, the
        predicate and the slot (``vera.harvest.changes`` keys facts on it)."""
        return (self.path, self.subject, self.predicate, self.slot)


def parse_locator(locator: str) -> tuple[int, int] | None:
    """``L12`` or ``L12-L20`` as (first, last); None for any other locator."""
    text = locator.strip()
    first, sep, last = text.partition("-")
    if not first.startswith("L") or not first[1:].isdigit():
        return None
    start = int(first[1:])
    if not sep:
        return (start, start) if start >= 1 else None
    if not last.startswith("L") or not last[1:].isdigit():
        return None
    end = int(last[1:])
    return (start, end) if 1 <= start <= end else None
