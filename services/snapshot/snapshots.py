"""Knowledge snapshots: an immutable, non-expiring freeze of one scope's active facts.

A snapshot pins the valid-time boundary (``as_of``), the system-time boundary (its creation
time, ``known_as_of``) and the retrieval contract versions. Retrieval keeps every fact
version with its transaction interval, so replaying a query with those boundaries returns
what was known then, whatever was written later; a replay under a different contract
version fails closed (the gateway checks, with the version retrieval reports). The frozen
fact versions are stored too: they are the snapshot's fact count and its audit record.
Missing, foreign and malformed snapshot ids all read as NOT_FOUND.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from vera.errors import InvalidInput, NotFound
from vera.request_fields import as_uuid, parse_uuid
from vera.services.snapshot.domain import Clock, utc_now

MAX_VERSION = 128


@dataclass(frozen=True)
class FrozenFact:
    fact_key: str
    version_id: str
    source_ids: tuple[str, ...] = ()
    source_observed_at: tuple[datetime, ...] = ()


@dataclass(frozen=True)
class Freeze:
    facts: Sequence[FrozenFact]
    change_position: int  # the change-log position the freeze read up to


class FactLog(Protocol):
    """Reads the authoritative facts; ``fact_log.KnowledgeFactLog`` implements it."""

    async def active_facts(
        self, scope_id: str, as_of: datetime, known_as_of: datetime
    ) -> Freeze: ...


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: uuid.UUID
    principal_id: uuid.UUID
    scope_id: uuid.UUID
    as_of: datetime
    known_as_of: datetime
    fact_count: int
    source_count: int
    newest_source_observed_at: datetime | None
    oldest_source_observed_at: datetime | None
    change_position: int
    assembler_version: str
    ontology_version: str
    policy_version: str
    embedding_version: str
    index_version: str
    created_at: datetime


class SnapshotRecords(Protocol):
    """The persistence port; ``store.PgSnapshotRecords`` implements it."""

    async def insert(self, snapshot: Snapshot, facts: Sequence[FrozenFact]) -> None: ...

    async def get(self, snapshot_id: uuid.UUID, principal_id: uuid.UUID) -> Snapshot | None: ...


def split_contract_version(assembler_version: str) -> tuple[str, str, str]:
    """``assembler;embedding;index`` -> (policy, embedding, index); a version without
    parts pins itself as the policy version only."""
    parts = assembler_version.split(";")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return assembler_version, "", ""


class SnapshotCatalog:
    def __init__(self, records: SnapshotRecords, facts: FactLog, clock: Clock = utc_now) -> None:
        self._records = records
        self._facts = facts
        self._clock = clock

    async def create(
        self,
        principal_id: str,
        scope_id: str,
        as_of: datetime | None,
        assembler_version: str,
        ontology_version: str = "",
    ) -> Snapshot:
        principal = parse_uuid("principal_id", principal_id)
        scope = parse_uuid("scope_id", scope_id)
        version = assembler_version.strip()
        if not version or len(version) > MAX_VERSION:
            raise InvalidInput("assembler_version", reason="invalid")
        if len(ontology_version) > MAX_VERSION:
            raise InvalidInput("ontology_version", reason="invalid")
        now = self._clock()
        valid_at = as_of or now
        freeze = await self._facts.active_facts(str(scope), valid_at, now)
        observed = [t for f in freeze.facts for t in f.source_observed_at]
        policy, embedding, index = split_contract_version(version)
        snapshot = Snapshot(
            snapshot_id=uuid.uuid4(),
            principal_id=principal,
            scope_id=scope,
            as_of=valid_at,
            known_as_of=now,
            fact_count=len(freeze.facts),
            source_count=len({s for f in freeze.facts for s in f.source_ids}),
            newest_source_observed_at=max(observed) if observed else None,
            oldest_source_observed_at=min(observed) if observed else None,
            change_position=freeze.change_position,
            assembler_version=version,
            ontology_version=ontology_version.strip(),
            policy_version=policy,
            embedding_version=embedding,
            index_version=index,
            created_at=now,
        )
        await self._records.insert(snapshot, freeze.facts)
        return snapshot

    async def get(self, principal_id: str, snapshot_id: str) -> Snapshot:
        principal = parse_uuid("principal_id", principal_id)
        wanted = as_uuid(snapshot_id)
        if wanted is None:
            raise NotFound()
        snapshot = await self._records.get(wanted, principal)
        if snapshot is None:
            raise NotFound()
        return snapshot
