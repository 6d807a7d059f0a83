"""Idempotency keys for the gateway's write tools, stored here so they survive gateway
restarts and are shared by every replica.

A key belongs to one principal. Its first call claims it; the gateway runs the tool and
completes the claim with the result, which later uses of the key replay for the TTL. The
same key with a different request hash is a mismatch. A claim whose call failed is
released; a claim left by a gateway that died mid-call lapses after ``claim_ttl`` so a
retry can take it over.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from vera.errors import InvalidInput
from vera.request_fields import parse_uuid
from vera.services.snapshot.domain import Clock, utc_now

MAX_KEY = 255
MAX_HASH = 128


class KeyState(enum.Enum):
    CLAIMED = "claimed"
    COMPLETED = "completed"
    IN_PROGRESS = "in_progress"
    MISMATCH = "mismatch"


@dataclass(frozen=True)
class Begun:
    state: KeyState
    result_json: str = ""


class IdempotencyStore(Protocol):
    """``store.PgIdempotencyStore`` implements it."""

    async def begin(
        self,
        principal_id: uuid.UUID,
        key: str,
        request_hash: str,
        now: datetime,
        claim_expires_at: datetime,
    ) -> Begun: ...

    async def complete(
        self,
        principal_id: uuid.UUID,
        key: str,
        request_hash: str,
        result_json: str,
        now: datetime,
        expires_at: datetime,
    ) -> None: ...

    async def release(self, principal_id: uuid.UUID, key: str, request_hash: str) -> None: ...


def _key(value: str) -> str:
    # Printable ASCII only: the key travels in an HTTP header too.
    if not value or len(value) > MAX_KEY or not all(" " < ch < "\x7f" for ch in value):
        raise InvalidInput("idempotency_key", reason="invalid")
    return value


def _hash(value: str) -> str:
    if not value or len(value) > MAX_HASH:
        raise InvalidInput("request_hash", reason="invalid")
    return value


class IdempotencyKeys:
    def __init__(
        self,
        store: IdempotencyStore,
        ttl: timedelta,
        claim_ttl: timedelta,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._claim_ttl = claim_ttl
        self._clock = clock

    async def begin(self, principal_id: str, key: str, request_hash: str) -> Begun:
        now = self._clock()
        return await self._store.begin(
            parse_uuid("principal_id", principal_id),
            _key(key),
            _hash(request_hash),
            now,
            now + self._claim_ttl,
        )

    async def complete(
        self, principal_id: str, key: str, request_hash: str, result_json: str
    ) -> None:
        now = self._clock()
        await self._store.complete(
            parse_uuid("principal_id", principal_id),
            _key(key),
            _hash(request_hash),
            result_json,
            now,
            now + self._ttl,
        )

    async def release(self, principal_id: str, key: str, request_hash: str) -> None:
        await self._store.release(
            parse_uuid("principal_id", principal_id), _key(key), _hash(request_hash)
        )
