"""A mixed write workload against a running stack, every call's outcome recorded.

Clients write through the real front doors: the MCP gateway with the official ``mcp``
client over HTTP (``knowledge_propose``; ``knowledge_get_context`` with ``persist=true``,
which stores a context pack; ``knowledge_feedback`` on a result of such a pack) and the
curator's ingest (``IngestKnowledge`` over gRPC with the stack's internal key, the call
`vera ingest` makes). Each call gets one outcome, Jepsen style:

- ``ok``: acknowledged; the write must be present afterwards.
- ``failed``: a structured error (the MCP ``data.code``, or the gRPC ErrorInfo reason);
  ``code`` says which.
- ``unknown``: no answer: the transport broke or the client's deadline passed (``code``
  ``transport`` or ``timeout``); the write may or may not have happened.

Some proposals are meant to be refused (``REFUSED``: a predicate off the allowlist), so
the check that a refused write left nothing behind has real refusals to look at.

Every write carries a unique marker (``call_id`` in its subject, query or ref) so a
checker finds exactly that call's rows. Importable by the load script: put tests/faults
on ``sys.path`` and use ``WriteWorkload`` and ``CallRecord``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from mcp import MCPError

from vera.config import Settings
from vera.errors import VeraError
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends
from vera.stack.launcher import bearer_mcp_client

OK, FAILED, UNKNOWN = "ok", "failed", "unknown"
PROPOSE, CONTEXT, FEEDBACK, INGEST = "propose", "context_persist", "feedback", "ingest"
# A proposal the knowledge service's policy refuses (its predicate is not on the
# allowlist): the service records a rejected attempt and must write no fact.
REFUSED = "propose_refused"
REFUSED_CODE = "invalid_input"
REFUSED_PREDICATE = "fault_not_an_allowed_predicate"
# The write mix of one client; FEEDBACK needs a persisted pack and runs CONTEXT until
# one exists.
DEFAULT_MIX: Mapping[str, float] = {
    PROPOSE: 0.30,
    REFUSED: 0.05,
    CONTEXT: 0.25,
    FEEDBACK: 0.25,
    INGEST: 0.15,
}
# The calls that write by subject (a checker finds their facts by it).
SUBJECT_OPS = frozenset({PROPOSE, REFUSED, INGEST})


def answered_as_expected(record: CallRecord) -> bool:
    """What a healthy stack answers: every write acknowledged, and the refused proposal
    refused with its stable code."""
    if record.op == REFUSED:
        return record.outcome == FAILED and record.code == REFUSED_CODE
    return record.outcome == OK


PROJECT = "faults"
SEED_FACTS = 12
# The MCP client is given this long beyond the gateway's own budget before a call counts
# as hung: the budget ends every downstream RPC, so anything later is a hang.
DEADLINE_SLACK_SECONDS = 3.0


@dataclass
class CallRecord:
    call_id: str
    op: str
    client: int
    started: float  # time.monotonic()
    deadline: float  # seconds the call may take (its budget plus the slack)
    ended: float = 0.0
    outcome: str = UNKNOWN
    code: str | None = None
    # The error's own reason where it gives one (MCP ``data.reason``, gRPC metadata
    # ``reason``): an outage is ``internal_error`` with reason ``unavailable``.
    reason: str | None = None
    # What a checker needs: the subject written, the pack id, the (pack, result_ref).
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def latency(self) -> float:
        return self.ended - self.started


class _Transport(Exception):
    """The call got no answer (connection refused or dropped)."""


@dataclass
class WriteWorkload:
    mcp_url: str
    mcp_token: str
    client_settings: Settings
    run_id: str
    project: str = PROJECT
    mcp_budget_seconds: float = 30.0
    ingest_deadline_seconds: float = 10.0
    mix: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    seed: int = 0
    records: list[CallRecord] = field(default_factory=list)
    # Persisted packs seen so far: (pack_id, result refs), for feedback calls.
    packs: list[tuple[str, list[str]]] = field(default_factory=list)
    _counter: int = 0

    # --- setup ------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Ensures the curated project and a few facts a context pack can return."""
        backends = Backends.open(self.client_settings, caller="cli")
        try:
            principal_id = str(self.client_settings.mcp.local_principal_id)
            await backends.identity.EnsureLocalPrincipal(
                identity_pb2.EnsureLocalPrincipalRequest(principal_id=principal_id)
            )
            facts = [
                kpb.FactInput(
                    subject=f"fault-service-{i}",
                    predicate="depends_on",
                    object=f"the fault queue number {i} over gRPC",
                    evidence=f"runbook line {i}",
                )
                for i in range(SEED_FACTS)
            ]
            await self._ingest(backends, facts, self.ingest_deadline_seconds * 6)
        finally:
            await backends.close()

    # --- the load ---------------------------------------------------------------------

    async def run(self, seconds: float, clients: int, *, phase: str = "") -> list[CallRecord]:
        """``clients`` concurrent clients issuing calls back to back for ``seconds``."""
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(seconds, stop.set)
        return await self.run_until(stop, clients, phase=phase)

    async def run_until(
        self, stop: asyncio.Event, clients: int, *, phase: str = ""
    ) -> list[CallRecord]:
        """``clients`` concurrent clients, each issuing calls back to back until ``stop``
        is set; returns this run's records (also appended to ``records``)."""
        backends = Backends.open(self.client_settings, caller="cli")
        try:
            batches = await asyncio.gather(
                *(self._client(n, stop, backends, phase) for n in range(clients))
            )
        finally:
            await backends.close()
        records = [r for batch in batches for r in batch]
        self.records.extend(records)
        return records

    async def one_of_each(self, *, phase: str = "") -> list[CallRecord]:
        """One call of every operation in turn, from one client."""
        backends = Backends.open(self.client_settings, caller="cli")
        session = _Session(self.mcp_url, self.mcp_token)
        try:
            records = [
                await self._call(op, 0, session, backends, phase)
                for op in (PROPOSE, CONTEXT, FEEDBACK, INGEST, REFUSED)
            ]
        finally:
            await backends.close()
        self.records.extend(records)
        return records

    async def _client(
        self, number: int, stop: asyncio.Event, backends: Backends, phase: str
    ) -> list[CallRecord]:
        rng = random.Random(f"{self.seed}-{self.run_id}-{phase}-{number}")
        ops, weights = zip(*self.mix.items(), strict=True)
        session = _Session(self.mcp_url, self.mcp_token)
        records: list[CallRecord] = []
        while not stop.is_set():
            op = rng.choices(ops, weights)[0]
            records.append(await self._call(op, number, session, backends, phase, rng))
        return records

    async def _call(
        self,
        op: str,
        client: int,
        session: _Session,
        backends: Backends,
        phase: str,
        rng: random.Random | None = None,
    ) -> CallRecord:
        rng = rng or random.Random(self._counter)
        if op == FEEDBACK and not self.packs:
            op = CONTEXT
        self._counter += 1
        call_id = f"{self.run_id}-{phase or 'p'}-{client}-{self._counter}"
        budget = self.ingest_deadline_seconds if op == INGEST else self.mcp_budget_seconds
        record = CallRecord(call_id, op, client, time.monotonic(), budget + DEADLINE_SLACK_SECONDS)
        record.detail["phase"] = phase
        try:
            async with asyncio.timeout(record.deadline):
                if op == INGEST:
                    await self._ingest_one(backends, record)
                else:
                    await self._mcp_call(session, record, rng)
            record.outcome = OK
        except MCPError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            record.outcome, record.code = FAILED, str(data.get("code", exc.code))
            record.reason = data.get("reason")
            record.detail["error_data"] = data
        except VeraError as exc:
            # A deadline passed on the way: the service may have committed.
            timed_out = "DEADLINE_EXCEEDED" in exc.message
            record.outcome = UNKNOWN if timed_out else FAILED
            record.code = "timeout" if timed_out else exc.reason
            record.reason = exc.metadata.get("reason")
        except TimeoutError:
            record.outcome, record.code = UNKNOWN, "timeout"
        except (_Transport, httpx.HTTPError, OSError) as exc:
            record.outcome, record.code = UNKNOWN, "transport"
            record.detail["error"] = repr(exc.__cause__ or exc)[:300]
        record.ended = time.monotonic()
        return record

    async def _mcp_call(self, session: _Session, record: CallRecord, rng: random.Random) -> None:
        if record.op in (PROPOSE, REFUSED):
            refused = record.op == REFUSED
            subject = f"fault-{'refused-' if refused else ''}{record.call_id}"
            record.detail["subject"] = subject
            result = await session.call(
                "knowledge_propose",
                {
                    "subject": subject,
                    "predicate": REFUSED_PREDICATE if refused else "depends_on",
                    "object": f"queue {rng.randrange(1000)}",
                    "evidence_text": "seen in a log",
                    "task_ref": f"task-{record.call_id}",
                    "runtime": "claude-code",
                },
            )
            record.detail["fact_key"] = (result.get("fact") or {}).get("fact_key")
            record.detail["created"] = result.get("outcome") == "created"
        elif record.op == CONTEXT:
            service = rng.randrange(SEED_FACTS)
            query = f"what does fault service {service} depend on {record.call_id}"
            record.detail["query"] = query
            result = await session.call(
                "knowledge_get_context",
                {
                    "query": query,
                    "project": self.project,
                    "persist": True,
                },
            )
            pack_id = result["pack_id"]
            record.detail["pack_id"] = pack_id
            refs = [r["result_ref"] for r in result["results"]]
            if pack_id and refs:
                self.packs.append((pack_id, refs))
        else:
            pack_id, refs = rng.choice(self.packs)
            ref = rng.choice(refs)
            record.detail.update(pack_id=pack_id, result_ref=ref)
            await session.call(
                "knowledge_feedback",
                {
                    "context_pack_id": pack_id,
                    "result_ref": ref,
                    "signal": rng.choice(["up", "down"]),
                },
            )

    async def _ingest_one(self, backends: Backends, record: CallRecord) -> None:
        subject = f"fault-ingest-{record.call_id}"
        record.detail["subject"] = subject
        await self._ingest(
            backends,
            [
                kpb.FactInput(
                    subject=subject,
                    predicate="depends_on",
                    object="the ledger queue",
                    evidence="curated in the fault runbook",
                )
            ],
            self.ingest_deadline_seconds,
        )

    async def _ingest(self, backends: Backends, facts: Iterable[kpb.FactInput], timeout: float):
        principal_id = str(self.client_settings.mcp.local_principal_id)
        project = await backends.identity.EnsureProject(
            identity_pb2.EnsureProjectRequest(principal_id=principal_id, slug=self.project),
            timeout=timeout,
        )
        return await backends.knowledge.IngestKnowledge(
            kpb.IngestKnowledgeRequest(
                principal_id=principal_id, scope_id=project.project.project_id, facts=list(facts)
            ),
            timeout=timeout,
        )


class _Session:
    """Calls over the official MCP client, each in a fresh session on its own task: when
    the transport breaks, the SDK cancels the task that opened the session, and that
    must be the call's task, not the load client's."""

    def __init__(self, url: str, token: str) -> None:
        self._url = url
        self._token = token

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        task = asyncio.create_task(self._call(tool, arguments))
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:  # the caller's deadline
            task.cancel()
            await asyncio.wait({task})
            raise
        if task.cancelled():
            raise _Transport()
        exc = task.exception()
        if exc is None:
            return task.result()
        # Raised inside the session, an answer arrives wrapped in the SDK's task groups.
        leaf = _first_leaf(exc)
        if isinstance(leaf, MCPError):
            raise leaf
        raise _Transport() from leaf

    async def _call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async with bearer_mcp_client(self._url, self._token) as client:
            result = await client.call_tool(tool, arguments)
        if result.is_error:
            raise MCPError(-32603, "tool error", {"code": "tool_error"})
        return result.structured_content or {}


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
