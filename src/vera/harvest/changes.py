"""Keeping a project current with its repository: what a harvest changes since the last.

The last harvest of one repository into one project (on one API) is remembered in a state
file beside the data dir (owner-only, never in the repository): its commit and, for each
fact, its identity (``Fact.identity``: file, subject, predicate, slot), value, locator,
evidence and the key knowledge gave it. A new harvest is compared with it:

- the same identity and value: unchanged (sent again, knowledge deduplicates it);
- the same identity, another value: the file now says something else, so the old fact is
  corrected (its validity ends at the new commit's time, where the replacement's starts;
  the old version stays answerable with ``as_of`` / ``known_as_of`` before it);
- an identity no longer stated: the file stopped saying it, so the fact's validity is
  closed at the new commit's time (a correction that changes only ``valid_to``);
- a new identity: a new fact.

Every one of those is a write knowledge records in the change log. The state is written
only after the whole harvest was loaded; an interrupted run loads again from the same
previous state, and knowledge's idempotent ingest turns what was already loaded into
``deduplicated`` / ``already_recorded``, never a duplicate.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vera.harvest.facts import Fact

STATE_FORMAT = 1


@dataclass(frozen=True)
class Known:
    """One fact the last harvest loaded: its identity, the key knowledge gave it and the
    fact record it was loaded from (``vera.harvest.records``)."""

    path: str
    slot: str
    fact_key: str
    record: dict[str, Any]

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.path, self.record["subject"], self.record["predicate"], self.slot)

    @property
    def object(self) -> str:
        return str(self.record["object"])


@dataclass
class State:
    commit: str = ""
    committed_at: str = ""
    facts: list[Known] = field(default_factory=list)

    def by_identity(self) -> dict[tuple[str, str, str, str], Known]:
        return {k.identity: k for k in self.facts}


@dataclass
class Plan:
    new: list[Fact] = field(default_factory=list)
    unchanged: list[tuple[Known, Fact]] = field(default_factory=list)
    changed: list[tuple[Known, Fact]] = field(default_factory=list)
    vanished: list[Known] = field(default_factory=list)


def plan(previous: State, facts: list[Fact]) -> Plan:
    known = previous.by_identity()
    out = Plan()
    stated = set()
    for fact in facts:
        stated.add(fact.identity)
        old = known.get(fact.identity)
        if old is None:
            out.new.append(fact)
        elif old.object == fact.object:
            out.unchanged.append((old, fact))
        else:
            out.changed.append((old, fact))
    out.vanished = [k for identity, k in known.items() if identity not in stated]
    return out


def state_path(data_dir: Path, api_url: str, project: str, repository: str) -> Path:
    """One file per (API, project, repository): a harvest into another deployment or
    project starts afresh."""
    digest = hashlib.sha256("\x1f".join((api_url, project, repository)).encode()).hexdigest()
    return data_dir / "harvest" / f"{digest[:32]}.json"


def load_state(path: Path) -> State:
    """The saved state; an empty one when there is none (or it is of another format)."""
    try:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return State()
    if raw.get("format") != STATE_FORMAT:
        return State()
    return State(commit=str(raw.get("commit", "")), committed_at=str(raw.get("committed_at", "")),
                 facts=[Known(**k) for k in raw.get("facts", [])])


def save_state(path: Path, state: State) -> None:
    """Written whole to a temporary file, then renamed over the old one: owner-only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_suffix(".tmp")
    data = {"format": STATE_FORMAT, "commit": state.commit, "committed_at": state.committed_at,
            "facts": [asdict(k) for k in state.facts]}
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)
