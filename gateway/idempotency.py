"""Idempotency keys on write tools: the ``Idempotency-Key`` header or
``params._meta.idempotencyKey``, keyed per principal.

The first call with a key claims it in the snapshot service (so keys survive gateway
restarts and are shared by every replica), runs, and stores its result; a later call
with the same key and the same tool and arguments replays that result, and the same key
with anything else is refused with invalid_input (-32602). A header and a parameter that
disagree are refused before the tool runs. A call that fails releases its claim so a
retry runs again. Tools that do not declare ``_meta`` idempotency ignore a key.

A call whose write succeeded is never released: its result is recorded with a few bounded
retries, and if the snapshot service still cannot take it the caller gets the result and
the claim stays, so a retry with the key answers invalid_input (reason ``in_progress``)
instead of writing again, until the claim lapses (``idempotency_claim_seconds``).

A replayed tool with ``replay_reaches_service`` still runs its body (result discarded)
so the service records the retry: a replayed knowledge_propose appears in the proposal
report as a deduplicated attempt, which the seed requires.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from starlette.requests import Request

from vera.errors import VeraError
from vera.gateway.bounds import BoundsError
from vera.gateway.spec import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_MAX, ToolSpec
from vera.snapshot.v1 import snapshot_pb2
from vera.snapshot.v1.snapshot_pb2_grpc import SnapshotServiceStub

log = logging.getLogger(__name__)

META_KEY = "idempotencyKey"
FIELD = "idempotency_key"
# While the first call with a key is still running, a concurrent retry waits this long
# for its result before it is refused.
IN_PROGRESS_WAIT_SECONDS = 5.0
IN_PROGRESS_POLL_SECONDS = 0.1
# Pauses before each further attempt to record a finished call's result.
COMPLETE_RETRY_DELAYS = (0.05, 0.2, 0.8)


def _valid(key: Any) -> str:
    if (
        not isinstance(key, str)
        or not key
        or len(key) > IDEMPOTENCY_KEY_MAX
        or not all(" " < ch < "\x7f" for ch in key)
    ):
        raise BoundsError(FIELD, "invalid")
    return key


def requested_key(request: Request | None, meta: Mapping[str, Any] | None) -> str | None:
    """The call's key, or None. Raises BoundsError when the header and the parameter
    disagree or the key is malformed."""
    header = request.headers.get(IDEMPOTENCY_HEADER) if request is not None else None
    parameter = (meta or {}).get(META_KEY)
    if header is not None and parameter is not None and header != parameter:
        raise BoundsError(FIELD, "header_parameter_mismatch")
    key = header if header is not None else parameter
    return None if key is None else _valid(key)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def request_hash(tool: str, arguments: Mapping[str, Any]) -> str:
    """Hash of the tool and its validated arguments (defaults filled), so equivalent
    bodies match and any difference does not."""
    body = json.dumps(
        {"tool": tool, "arguments": arguments},
        sort_keys=True,
        separators=(",", ":"),
        default=_json_default,
    )
    return hashlib.sha256(body.encode()).hexdigest()


Body = Callable[[], Awaitable[dict[str, Any]]]


async def run_once(
    snapshot: SnapshotServiceStub,
    principal_id: str,
    key: str,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    body: Body,
    *,
    recorder: SnapshotServiceStub | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> dict[str, Any]:
    """``recorder`` records a finished write's result: a stub outside the call's budget,
    so a write that finished as the budget ran out is still recorded (default: ``snapshot``)."""
    digest = request_hash(spec.name, arguments)
    waited = 0.0
    while True:
        begun = await snapshot.BeginIdempotentCall(
            snapshot_pb2.BeginIdempotentCallRequest(
                principal_id=principal_id, key=key, request_hash=digest
            )
        )
        if begun.state != snapshot_pb2.IDEMPOTENCY_STATE_IN_PROGRESS:
            break
        if waited >= IN_PROGRESS_WAIT_SECONDS:
            raise BoundsError(FIELD, "in_progress")
        await sleep(IN_PROGRESS_POLL_SECONDS)
        waited += IN_PROGRESS_POLL_SECONDS
    if begun.state == snapshot_pb2.IDEMPOTENCY_STATE_MISMATCH:
        raise BoundsError(FIELD, "reused_with_different_request")
    if begun.state == snapshot_pb2.IDEMPOTENCY_STATE_COMPLETED:
        if spec.replay_reaches_service:
            try:
                await body()
            except VeraError as exc:
                # The replay returns the first result whatever the retry's record says.
                log.info("tool %s: replayed call refused with %s", spec.name, exc.reason)
        return json.loads(begun.result_json)
    if begun.state != snapshot_pb2.IDEMPOTENCY_STATE_CLAIMED:
        raise RuntimeError("idempotency state unset")
    release = snapshot_pb2.ReleaseIdempotentCallRequest(
        principal_id=principal_id, key=key, request_hash=digest
    )
    try:
        data = await body()
    except BaseException:
        try:
            await snapshot.ReleaseIdempotentCall(release)
        except Exception:
            # The claim lapses on its own; the tool's own failure is what the caller sees.
            log.warning("tool %s: could not release an idempotency claim", spec.name)
        raise
    complete = snapshot_pb2.CompleteIdempotentCallRequest(
        principal_id=principal_id,
        key=key,
        request_hash=digest,
        result_json=json.dumps(data, separators=(",", ":")),
    )
    # Shielded: the call's budget may end now, but a finished write is recorded (or its
    # claim kept) all the same, so a retry replays it instead of writing twice.
    await asyncio.shield(_record(recorder or snapshot, complete, spec.name, sleep))
    return data


async def _record(
    recorder: SnapshotServiceStub,
    complete: snapshot_pb2.CompleteIdempotentCallRequest,
    tool: str,
    sleep: Callable[[float], Awaitable[None]],
) -> None:
    for delay in (*COMPLETE_RETRY_DELAYS, None):
        try:
            await recorder.CompleteIdempotentCall(complete)
            return
        except (VeraError, TimeoutError) as exc:
            if delay is None:
                # The write happened: answer it, and leave the claim so a retry is refused
                # as in progress rather than run again.
                log.warning(
                    "tool %s: result not recorded for its idempotency key (%s)",
                    tool,
                    getattr(exc, "reason", type(exc).__name__),
                )
                return
            await sleep(delay)
