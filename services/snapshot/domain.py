"""Persisted context packs: immutable, TTL-bound, deduplicated, private to their principal.

A pack is deduplicated when the same principal persists the same canonical request with the
same content and assembler version in the same scope while an identical pack is still live.
A call's ``usage_ref`` (cost attribution) is recorded with the pack it stored or reused and
is no part of the pack's identity.
Missing, expired, foreign and malformed pack ids all read as EXPIRED_CONTEXT_PACK, so a
caller learns nothing about packs it cannot read. Time comes from an injected clock so
expiry is testable without sleeping.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from vera import limits
from vera.errors import ExpiredContextPack, InvalidInput
from vera.request_fields import as_uuid, parse_uuid

Clock = Callable[[], datetime]
MAX_ASSEMBLER_VERSION = 64
MAX_USAGE_REF = limits.ID_LIKE[1]


def utc_now() -> datetime:
    return datetime.now(UTC)


def canonical_json(value: Any) -> str:
    """The byte-stable JSON the dedupe hashes are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ContextPack:
    pack_id: uuid.UUID
    principal_id: uuid.UUID
    scope_id: uuid.UUID
    canonical_request: dict[str, Any]
    content: dict[str, Any]
    request_hash: str
    content_hash: str
    assembler_version: str
    created_at: datetime
    expires_at: datetime


class SnapshotStore(Protocol):
    """The persistence port; ``store.PgSnapshotStore`` implements it."""

    async def insert_deduplicated(
        self, candidate: ContextPack, now: datetime, usage_ref: str = ""
    ) -> tuple[ContextPack, bool]:
        """Stores ``candidate`` unless an identical pack is live; True when deduplicated.
        Records ``usage_ref``, when given, against the stored or reused pack."""
        ...

    async def get_live(
        self, pack_id: uuid.UUID, principal_id: uuid.UUID, now: datetime
    ) -> ContextPack | None: ...

    async def sweep_expired(self, now: datetime) -> int:
        """Deletes every pack expired at ``now``; returns how many."""
        ...


class PrincipalErasure(Protocol):
    """The erasure port; ``erasure.PgPrincipalErasure`` implements it."""

    async def erase(self, principal_id: str) -> dict[str, int]:
        """Deletes everything the principal persisted here; the rows deleted, per table."""
        ...


class SnapshotService:
    def __init__(self, store: SnapshotStore, ttl: timedelta, clock: Clock = utc_now) -> None:
        self._store = store
        self._ttl = ttl
        self._clock = clock

    async def create_context_pack(
        self,
        principal_id: str,
        scope_id: str,
        canonical_request: dict[str, Any],
        content: dict[str, Any],
        assembler_version: str,
        usage_ref: str = "",
    ) -> tuple[ContextPack, bool]:
        principal = parse_uuid("principal_id", principal_id)
        scope = parse_uuid("scope_id", scope_id)
        version = assembler_version.strip()
        if not version or len(version) > MAX_ASSEMBLER_VERSION:
            raise InvalidInput("assembler_version")
        if len(usage_ref) > MAX_USAGE_REF:
            raise InvalidInput("usage_ref")
        now = self._clock()
        candidate = ContextPack(
            pack_id=uuid.uuid4(),
            principal_id=principal,
            scope_id=scope,
            canonical_request=canonical_request,
            content=content,
            request_hash=content_hash(canonical_request),
            content_hash=content_hash(content),
            assembler_version=version,
            created_at=now,
            expires_at=now + self._ttl,
        )
        # The storage quotas (per scope and per principal) are enforced by the store inside
        # the same transaction as the dedupe lookup, so a deduplicated retry never counts twice.
        return await self._store.insert_deduplicated(candidate, now, usage_ref)

    async def get_context_pack(self, principal_id: str, pack_id: str) -> ContextPack:
        principal = parse_uuid("principal_id", principal_id)
        pack_uuid = as_uuid(pack_id)
        if pack_uuid is None:
            raise ExpiredContextPack()
        pack = await self._store.get_live(pack_uuid, principal, self._clock())
        if pack is None:
            raise ExpiredContextPack()
        return pack

    async def sweep(self) -> int:
        return await self._store.sweep_expired(self._clock())
