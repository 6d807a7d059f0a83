"""The write kernel every knowledge transaction shares: fact versions, assertions and their
evidence, key locks, the outbox (change log) and the proposal targets a new proposal is
addressed to.

Writes append their outbox rows last, under one advisory lock, so outbox positions become
visible in commit order (a tailing indexer never skips a position that commits late).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from . import curation
from .domain import ChangeKind, FactState
from .ingest import Counts, FactIn, SourceIn
from .proposals import Proposal

# Any constant works; it only has to be the same for every writer of this schema.
OUTBOX_LOCK = 0x6B6E6F776C656467  # "knowledg"

# The columns of a fact version besides its id and recorded_at (always now()).
VERSION_COLUMNS = (
    "fact_key", "scope_id", "subject", "predicate", "object", "subject_norm",
    "predicate_norm", "object_norm", "state", "trust_tier", "authority", "valid_from",
    "valid_to", "repository", "branch", "code_path", "document_type", "source_type",
    "origin", "created_by", "superseded_by", "corrects", "correction_reason",
)  # fmt: skip
# Where a version stands in a correction chain: a copied version starts its own.
_LINEAGE_COLUMNS = frozenset({"superseded_by", "corrects", "correction_reason"})


async def insert_version(
    conn: asyncpg.Connection, *, copy_of: uuid.UUID | None = None, **values: Any
) -> uuid.UUID:
    """Appends a fact version and returns its id: ``values`` (others take their defaults),
    or a copy of version ``copy_of`` with ``values`` replacing its columns."""
    unknown = set(values) - set(VERSION_COLUMNS)
    if unknown:
        raise ValueError(f"not a fact version column: {sorted(unknown)}")
    version_id = uuid.uuid4()
    params: list[Any] = [version_id]
    columns = ["version_id", "recorded_at"]
    expressions = ["$1", "now()"]
    for name, value in values.items():
        params.append(value)
        columns.append(name)
        expressions.append(f"${len(params)}")
    if copy_of is None:
        source = f"VALUES ({', '.join(expressions)})"
    else:
        copied = [c for c in VERSION_COLUMNS if c not in values and c not in _LINEAGE_COLUMNS]
        columns += copied
        params.append(copy_of)
        source = (
            f"SELECT {', '.join(expressions + copied)} FROM facts"
            f" WHERE version_id = ${len(params)}"
        )
    await conn.execute(f"INSERT INTO facts ({', '.join(columns)}) {source}", *params)
    return version_id


def curated_columns(fact: FactIn, scope_id: uuid.UUID | str) -> dict[str, Any]:
    """The columns a curated fact's new ACTIVE version takes from its input (ingest and
    correction alike); the caller adds source_type, created_by and any lineage."""
    return {
        "fact_key": fact.fact_key, "scope_id": scope_id, "subject": fact.subject,
        "predicate": fact.predicate, "object": fact.object,
        "subject_norm": fact.subject_norm, "predicate_norm": fact.predicate_norm,
        "object_norm": fact.object_norm, "state": FactState.ACTIVE.value,
        "trust_tier": fact.trust_tier, "authority": fact.authority,
        "valid_from": fact.valid_from, "valid_to": fact.valid_to,
        "repository": fact.repository, "branch": fact.branch, "code_path": fact.code_path,
        "document_type": fact.document_type, "origin": "curated",
    }  # fmt: skip


async def insert_assertion(
    conn: asyncpg.Connection,
    *,
    fact_key: str,
    scope_id: uuid.UUID,
    source_pk: uuid.UUID | None,
    trust_tier: int,
    authority: float,
    status: str,
    asserted_by: uuid.UUID,
) -> uuid.UUID:
    """Appends an assertion supporting ``fact_key`` and returns its id; ``source_pk`` None
    for a proposal's or a curator's own assertion."""
    assertion_id = uuid.uuid4()
    await conn.execute(
        """INSERT INTO assertions (assertion_id, fact_key, scope_id, source_pk, supports,
               trust_tier, authority, status, asserted_by)
           VALUES ($1, $2, $3, $4, true, $5, $6, $7, $8)""",
        assertion_id,
        fact_key,
        scope_id,
        source_pk,
        trust_tier,
        authority,
        status,
        asserted_by,
    )
    return assertion_id


async def insert_evidence(
    conn: asyncpg.Connection, assertion_id: uuid.UUID, items: Sequence[tuple[str, str]]
) -> None:
    """Appends evidence to an assertion: one row per ``(text, locator)``."""
    if items:
        await conn.executemany(
            "INSERT INTO evidence (evidence_id, assertion_id, text, locator)"
            " VALUES ($1, $2, $3, $4)",
            [(uuid.uuid4(), assertion_id, text, locator) for text, locator in items],
        )


async def close_version(conn: asyncpg.Connection, version_id: uuid.UUID) -> None:
    """Ends a version's transaction time: a successor version becomes current."""
    await conn.execute("UPDATE facts SET superseded_at = now() WHERE version_id = $1", version_id)


async def lock_keys(conn: asyncpg.Connection, keys: Iterable[str]) -> None:
    """Transaction locks on fact keys (or other names), taken in one stable order."""
    await conn.execute(
        """SELECT count(pg_advisory_xact_lock(h)) FROM (
               SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest($1::text[]) AS k
               ORDER BY h) AS locks""",
        sorted(set(keys)),
    )


async def lock_outbox(conn: asyncpg.Connection) -> None:
    """The writers' lock on the outbox, held until the transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", OUTBOX_LOCK)


async def change_position(conn: asyncpg.Connection) -> int:
    """The newest position of the change log."""
    return await conn.fetchval("SELECT coalesce(max(position), 0) FROM outbox")


@dataclass
class Outbox:
    """Outbox rows of one transaction, written last by ``flush``; ``actor_id`` is the
    principal whose action the transaction is (the change feed's "who")."""

    actor_id: uuid.UUID | None = None
    rows: list[tuple[str, uuid.UUID | None, uuid.UUID, str]] = field(default_factory=list)
    _seen: set[tuple[str, object]] = field(default_factory=set)

    def add(
        self,
        kind: ChangeKind,
        scope_id: uuid.UUID,
        *,
        version_id: uuid.UUID | None = None,
        ref: str = "",
    ) -> None:
        key = (kind.value, version_id or ref)
        if key in self._seen:
            return
        self._seen.add(key)
        self.rows.append((kind.value, version_id, scope_id, ref))

    async def flush(self, conn: asyncpg.Connection) -> None:
        if not self.rows:
            return
        await lock_outbox(conn)
        await conn.executemany(
            "INSERT INTO outbox (kind, version_id, scope_id, ref, actor_id)"
            " VALUES ($1, $2, $3, $4, $5)",
            [(*row, self.actor_id) for row in self.rows],
        )


async def record_proposal_targets(
    conn: asyncpg.Connection, proposal: Proposal, version_id: uuid.UUID
) -> None:
    """Addresses a newly created PROPOSED version to the proposer's shared projects."""
    targets = curation.proposal_targets(proposal)
    if targets:
        await conn.executemany(
            "INSERT INTO proposal_targets (version_id, fact_key, scope_id) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            [(version_id, proposal.fact_key, t) for t in targets],
        )


# A source line that leaves a field empty keeps its stored value, so a refresh line needs
# only the id and the new observed_at (docs/knowledge-model.md, "Refreshing a source").
_KEPT = "coalesce(nullif(EXCLUDED.{column}, ''), sources.{column})"


async def upsert_sources(
    conn: asyncpg.Connection,
    scope_id: uuid.UUID,
    sources: Sequence[SourceIn],
    source_pks: dict[str, uuid.UUID],
    counts: Counts,
    outbox: Outbox,
) -> None:
    """Records each source in the scope (a field left empty keeps its stored value), a new
    artifact version for each observed change; ``source_pks`` gains each one's key."""
    seen: set[str] = set()
    for s in sources:
        if s.source_id in seen:
            counts.deduplicated += 1
            continue
        seen.add(s.source_id)
        row = await conn.fetchrow(
            f"""INSERT INTO sources
                   (source_pk, scope_id, source_id, source_type, title, uri, observed_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7)
               ON CONFLICT (scope_id, source_id) DO UPDATE SET
                   source_type = {_KEPT.format(column="source_type")},
                   title = {_KEPT.format(column="title")},
                   uri = {_KEPT.format(column="uri")},
                   observed_at = coalesce(EXCLUDED.observed_at, sources.observed_at),
                   updated_at = now()
               WHERE (sources.source_type, sources.title, sources.uri, sources.observed_at)
                   IS DISTINCT FROM ({_KEPT.format(column="source_type")},
                       {_KEPT.format(column="title")}, {_KEPT.format(column="uri")},
                       coalesce(EXCLUDED.observed_at, sources.observed_at))
               RETURNING source_pk, (xmax = 0) AS inserted""",
            uuid.uuid4(),
            scope_id,
            s.source_id,
            s.source_type,
            s.title,
            s.uri,
            s.observed_at,
        )
        if row is None:  # identical to what is stored: nothing written
            source_pks[s.source_id] = await conn.fetchval(
                "SELECT source_pk FROM sources WHERE scope_id = $1 AND source_id = $2",
                scope_id,
                s.source_id,
            )
            counts.deduplicated += 1
            continue
        source_pks[s.source_id] = row["source_pk"]
        # Every observed change of a source is a new artifact version.
        await conn.execute(
            """INSERT INTO source_versions
                   (source_pk, version, source_type, title, uri, observed_at)
               SELECT s.source_pk,
                      coalesce((SELECT max(version) FROM source_versions v
                                WHERE v.source_pk = s.source_pk), 0) + 1,
                      s.source_type, s.title, s.uri, s.observed_at
               FROM sources s WHERE s.source_pk = $1""",
            row["source_pk"],
        )
        if row["inserted"]:
            counts.created += 1
        else:
            counts.deduplicated += 1
        outbox.add(ChangeKind.SOURCE_UPSERTED, scope_id, ref=s.source_id)
