"""Checkers over a fault run's call records and the stack's PostgreSQL.

Each returns a list of violations (empty when the property holds), worded for a failure
message, so a test asserts ``== []`` and a report prints them.

- ``acknowledged_writes_missing``: every ``ok`` write is present.
- ``definite_failures_applied``: a call refused with a definite code (the input was
  refused before anything ran) wrote nothing. ``unknown`` calls and infrastructure
  failures (``unavailable``) may have committed before the answer was lost: either way
  is allowed, and ``applied_share`` reports how often.
- ``half_applied_writes``: every fact version has its change-log row and every proposal
  version its attempt (what one transaction writes together).
- ``refusals_acknowledged``: a proposal meant to be refused (``REFUSED``) never succeeds.
- ``hangs``: no call took longer than its deadline (budget plus slack).
- ``unstable_failures``: every failure is a refusal with its stable code or the outage
  answer (``is_outage``), never a bare ``internal_error`` (a bug).
- ``index_disagreement``: once the tailer has caught up with the change log, retrieval
  holds exactly one document per live fact version (a row of ``knowledge.facts``; an
  erased version is deleted there), none for a version that no longer exists, each with
  the version's current transaction end, and one vector per version.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import asyncpg
from fault_workload import CONTEXT, FAILED, FEEDBACK, OK, REFUSED, SUBJECT_OPS, UNKNOWN, CallRecord

from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends

# The codes (MCP data.code, gRPC reasons for the curator's ingest) that mean "refused
# before anything ran".
DEFINITE_CODES = frozenset(
    {
        "invalid_input",
        "quota_exceeded",
        "unauthorized",
        "unauthenticated",
        "ambiguous_project",
        "project_out_of_scope",
        "expired_context_pack",
        "unsupported_version",
        "INVALID_INPUT",
        "QUOTA_EXCEEDED",
        "UNAUTHORIZED",
        "PROJECT_OUT_OF_SCOPE",
    }
)


def is_outage(record: CallRecord) -> bool:
    """The contract's answer while a dependency is down: MCP ``internal_error`` with
    ``data.reason`` ``unavailable`` (a retryable outage, told apart from a bug), or the
    gRPC status UNAVAILABLE."""
    return (record.code, record.reason) == ("internal_error", "unavailable") or (
        record.code == "UNAVAILABLE"
    )


async def applied(conn: asyncpg.Connection, records: Iterable[CallRecord]) -> dict[str, bool]:
    """call_id -> whether that call's write is in PostgreSQL."""
    records = list(records)
    subjects = [r.detail["subject"] for r in records if r.op in SUBJECT_OPS]
    found_subjects = {
        row["subject"]
        for row in await conn.fetch(
            "SELECT DISTINCT subject FROM knowledge.facts WHERE subject = ANY($1::text[])", subjects
        )
    }
    queries = [r.detail["query"] for r in records if r.op == CONTEXT]
    found_queries = {
        row["query"]
        for row in await conn.fetch(
            "SELECT DISTINCT canonical_request->>'query' AS query FROM snapshot.context_packs"
            " WHERE canonical_request->>'query' = ANY($1::text[])",
            queries,
        )
    }
    feedback = [(r.detail["pack_id"], r.detail["result_ref"]) for r in records if r.op == FEEDBACK]
    found_feedback = {
        (row["pack_id"], row["result_ref"])
        for row in await conn.fetch(
            "SELECT pack_id, result_ref FROM knowledge.retrieval_feedback"
            " WHERE pack_id = ANY($1::text[])",
            [pack for pack, _ in feedback],
        )
    }
    result = {}
    for r in records:
        if r.op in SUBJECT_OPS:
            result[r.call_id] = r.detail["subject"] in found_subjects
        elif r.op == CONTEXT:
            result[r.call_id] = r.detail["query"] in found_queries
        else:
            result[r.call_id] = (r.detail["pack_id"], r.detail["result_ref"]) in found_feedback
    return result


async def acknowledged_writes_missing(
    conn: asyncpg.Connection, records: Sequence[CallRecord]
) -> list[str]:
    acknowledged = [r for r in records if r.outcome == OK]
    present = await applied(conn, acknowledged)
    return [
        f"{r.op} {r.call_id} was acknowledged but is missing"
        for r in acknowledged
        if not present[r.call_id]
    ]


async def definite_failures_applied(
    conn: asyncpg.Connection, records: Sequence[CallRecord]
) -> list[str]:
    # Feedback on a (pack, result) another call already signalled is a replay, not a
    # write of its own: only the calls with a write of their own are checked.
    refused = [
        r for r in records if r.outcome == FAILED and r.code in DEFINITE_CODES and r.op != FEEDBACK
    ]
    present = await applied(conn, refused)
    return [
        f"{r.op} {r.call_id} was refused ({r.code}) but written"
        for r in refused
        if present[r.call_id]
    ]


async def applied_share(
    conn: asyncpg.Connection, records: Sequence[CallRecord]
) -> dict[str, tuple[int, int]]:
    """For calls without a definite answer (unknown, or an outage): op -> (applied, total)."""
    open_ended = [
        r
        for r in records
        if r.op != FEEDBACK and (r.outcome == UNKNOWN or (r.outcome == FAILED and is_outage(r)))
    ]
    present = await applied(conn, open_ended)
    share: dict[str, tuple[int, int]] = {}
    for r in open_ended:
        done, total = share.get(r.op, (0, 0))
        share[r.op] = (done + present[r.call_id], total + 1)
    return share


async def half_applied_writes(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch(
        """SELECT 'fact version ' || f.version_id || ' has no change-log row' AS what
             FROM knowledge.facts f
            WHERE NOT EXISTS (SELECT 1 FROM knowledge.outbox o
                               WHERE o.version_id = f.version_id AND o.kind = 'fact_upserted')
           UNION ALL
           SELECT 'proposal ' || f.version_id || ' has no attempt'
             FROM knowledge.facts f
            WHERE f.origin = 'proposal' AND f.corrects IS NULL AND NOT EXISTS (
                  SELECT 1 FROM knowledge.proposal_attempts a WHERE a.fact_key = f.fact_key)"""
    )
    return [row["what"] for row in rows]


def hangs(records: Sequence[CallRecord]) -> list[str]:
    return [
        f"{r.op} {r.call_id} took {r.latency:.1f} s (deadline {r.deadline:.1f} s, "
        f"{r.outcome} {r.code})"
        for r in records
        if r.latency > r.deadline or r.code == "timeout"
    ]


def refusals_acknowledged(records: Sequence[CallRecord]) -> list[str]:
    return [
        f"{r.op} {r.call_id} was meant to be refused but was acknowledged"
        for r in records
        if r.op == REFUSED and r.outcome == OK
    ]


def unstable_failures(records: Sequence[CallRecord]) -> list[str]:
    return [
        f"{r.op} {r.call_id} failed with {r.code} (reason {r.reason})"
        for r in records
        if r.outcome == FAILED and r.code not in DEFINITE_CODES and not is_outage(r)
    ]


@dataclass
class IndexComparison:
    facts: int
    documents: int
    vectors: int
    missing: list[str]  # live versions without a document
    extra: list[str]  # documents of versions that do not exist
    stale: list[str]  # documents whose transaction end differs from the version's

    def violations(self) -> list[str]:
        found = [f"version {v} has no index entry" for v in self.missing[:20]]
        found += [f"index entry {v} has no live version" for v in self.extra[:20]]
        found += [f"index entry {v} disagrees with its version" for v in self.stale[:20]]
        if self.vectors != self.facts:
            found.append(f"{self.vectors} vectors for {self.facts} live fact versions")
        return found


async def compare_index(conn: asyncpg.Connection, backends: Backends) -> IndexComparison:
    """One look at knowledge's fact versions against retrieval's documents and vectors."""
    status = await backends.retrieval.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
    rows = await conn.fetch(
        """SELECT coalesce(f.version_id::text, d.version_id) AS version_id,
                  f.version_id IS NOT NULL AS live, d.version_id IS NOT NULL AS indexed,
                  f.superseded_at IS NOT DISTINCT FROM d.superseded_at AS current
             FROM knowledge.facts f
             FULL JOIN retrieval.documents d ON d.version_id = f.version_id::text"""
    )
    return IndexComparison(
        facts=sum(r["live"] for r in rows),
        documents=sum(r["indexed"] for r in rows),
        vectors=status.indexed_facts,
        missing=[r["version_id"] for r in rows if r["live"] and not r["indexed"]],
        extra=[r["version_id"] for r in rows if r["indexed"] and not r["live"]],
        stale=[r["version_id"] for r in rows if r["live"] and r["indexed"] and not r["current"]],
    )


async def wait_for_index_agreement(
    conn: asyncpg.Connection, backends: Backends, timeout: float
) -> tuple[float, IndexComparison]:
    """Waits until the tailer applied the whole change log and the index agrees; returns
    the seconds it took and the last comparison (with its violations if time ran out)."""
    started = time.monotonic()
    while True:
        head = await conn.fetchval("SELECT coalesce(max(position), 0) FROM knowledge.outbox")
        status = await backends.retrieval.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
        if status.indexed_position >= head:
            comparison = await compare_index(conn, backends)
            if not comparison.violations():
                return time.monotonic() - started, comparison
        if time.monotonic() - started > timeout:
            return time.monotonic() - started, await compare_index(conn, backends)
        await asyncio.sleep(0.2)
