"""A harvest: the facts a repository's files state at one commit.

``harvest_checkout`` lists the commit's tree, reads only the files some extractor wants
(bounded in size and count), and hands each to those extractors; ``finish`` turns what
they found into publishable facts: each fact's evidence is its exact lines, screened for
credentials (``vera.secret_screen``), bounded as knowledge bounds curated text, and
required to hold the fact's quote. A fact failing any of that is dropped and counted by
reason, never repaired.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from vera import limits
from vera.harvest.extractors import EXTRACTORS, Extractor
from vera.harvest.facts import Document, Fact
from vera.harvest.git import Checkout, Commit, GitError, TreeEntry
from vera.secret_screen import find_secret

MAX_FILE_BYTES = 512 * 1024
MAX_FILES_READ = 20_000
MAX_BYTES_READ = 128 * 1024 * 1024  # every file read is held at once (one git cat-file)
# Other projects' files checked into this one: what they state is not this repository's.
VENDORED = ("node_modules/", "vendor/", "third_party/", "site-packages/", ".venv/")
# What the repository's tests read (other projects' manifests, sample charts and
# manifests): it states what a test exercises, not how this repository is built or run.
TEST_MATERIAL = ("test/", "tests/", "__tests__/", "testdata/", "test-data/", "test_data/",
                 "fixtures/", "__fixtures__/")


@dataclass
class Harvest:
    repository: str
    branch: str
    commit: Commit
    files_listed: int = 0
    files_read: int = 0
    facts: list[Fact] = field(default_factory=list)
    # reason -> count of facts (or files) left out: secret, no_quote, too_long, duplicate,
    # unreadable (files too large or not UTF-8), too_many_files (beyond the count or
    # byte budget), extractor_failed
    skipped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def _not_this_repositorys(path: str) -> bool:
    return any(f"/{folder}" in f"/{path}" for folder in VENDORED + TEST_MATERIAL)


def wanted_by(path: str) -> list[Extractor]:
    if _not_this_repositorys(path):
        return []
    return [e for e in EXTRACTORS if e.wants(path)]


def extract_document(doc: Document, extractors: Iterable[Extractor], skipped: Counter[str]
                     ) -> list[Fact]:
    facts: list[Fact] = []
    for extractor in extractors:
        try:
            facts.extend(extractor.extract(doc))
        except Exception:  # one odd file must not stop a harvest
            # The file states nothing through this extractor; counted, never guessed at.
            skipped["extractor_failed"] += 1
    return facts


def finish(doc: Document, facts: Iterable[Fact], skipped: Counter[str]) -> list[Fact]:
    """Each fact with its evidence, or dropped (``skipped[reason] += 1``)."""
    out: list[Fact] = []
    for fact in facts:
        if not 1 <= fact.start <= fact.end <= len(doc.lines):
            skipped["bad_range"] += 1
            continue
        evidence = "\n".join(doc.lines[fact.start - 1:fact.end])
        if len(evidence) > limits.EVIDENCE_TEXT[1] or len(fact.subject) > limits.SUBJECT[1] \
                or len(fact.object) > limits.PREDICATE_OBJECT[1] or not fact.object.strip():
            skipped["too_long"] += 1
            continue
        if not fact.quote or fact.quote not in evidence:
            skipped["no_quote"] += 1
            continue
        if any(find_secret(text) for text in (evidence, fact.subject, fact.object)):
            skipped["secret"] += 1
            continue
        out.append(replace(fact, evidence=evidence))
    return out


def harvest_files(repository: str, files: Iterable[tuple[str, bytes]], harvest: Harvest) -> None:
    """Extracts from (path, content) pairs into ``harvest``: the pure part of a harvest."""
    seen: set[tuple[str, str, str, str]] = set()
    for path, content in files:
        extractors = wanted_by(path)
        if not extractors:
            continue
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            harvest.skipped["unreadable"] += 1
            continue
        harvest.files_read += 1
        doc = Document(repository, path, text.removeprefix("\ufeff"))
        for fact in finish(doc, extract_document(doc, extractors, harvest.skipped),
                           harvest.skipped):
            if fact.identity in seen:
                harvest.skipped["duplicate"] += 1
                continue
            seen.add(fact.identity)
            harvest.facts.append(fact)


def within_ontology(facts: list[Fact], allowed: Iterable[str]) -> tuple[list[Fact], list[str]]:
    """The facts whose predicate the deployment's ontology has, and the predicates it
    lacks (sorted): a custom ontology without one gets none of those facts, and the
    harvest names what it left out rather than stating it under another predicate."""
    known = {p.strip().casefold() for p in allowed}
    kept = [f for f in facts if f.predicate.casefold() in known]
    missing = sorted({f.predicate for f in facts if f.predicate.casefold() not in known})
    return kept, missing


def harvest_checkout(path: Path, revision: str = "HEAD", repository: str | None = None
                     ) -> Harvest:
    """The facts the checkout at ``path`` states at ``revision`` (read from git objects).

    ``repository`` overrides the identity read from the checkout's remotes; with neither,
    GitError says so (a fact must name a repository others can find).
    """
    started = time.monotonic()
    checkout = Checkout(path)
    identity = repository or checkout.remote_identity()
    if not identity:
        raise GitError(f"{path}: no remote names this repository's host; "
                       "pass --repository (for example github.com/acme/payments)")
    commit = checkout.commit(revision)
    harvest = Harvest(identity, checkout.branch() if revision == "HEAD" else "", commit)
    entries = checkout.files(commit.id)
    harvest.files_listed = len(entries)
    candidates = [entry for entry in entries if wanted_by(entry.path)]
    sizes = checkout.sizes(candidates)
    wanted: list[TreeEntry] = []
    budget = MAX_BYTES_READ
    for entry in candidates:
        size = sizes[entry.object_id]
        if size > MAX_FILE_BYTES:
            harvest.skipped["unreadable"] += 1
        elif len(wanted) >= MAX_FILES_READ or size > budget:
            harvest.skipped["too_many_files"] += 1
        else:
            wanted.append(entry)
            budget -= size
    blobs = ((entry.path, content) for entry, content in checkout.read_blobs(wanted))
    harvest_files(identity, blobs, harvest)
    harvest.seconds = time.monotonic() - started
    return harvest
