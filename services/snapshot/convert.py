"""Proto <-> domain conversions of SnapshotService: every message its servicer sends or
reads is built here; the servicer builds only its responses, from these."""

from __future__ import annotations

import json
from typing import Any

from vera.errors import InvalidInput
from vera.rpc.timestamps import to_timestamp
from vera.services.snapshot.domain import ContextPack
from vera.services.snapshot.idempotency import KeyState
from vera.services.snapshot.snapshots import Snapshot
from vera.snapshot.v1 import snapshot_pb2 as pb


def json_object(text: str, field: str) -> dict[str, Any]:
    """A pack part off the wire: a JSON object, hashed and stored, never read inside."""
    try:
        value = json.loads(text)
    except ValueError:
        raise InvalidInput(field) from None
    if not isinstance(value, dict):
        raise InvalidInput(field)
    return value


def pack_to_proto(pack: ContextPack) -> pb.ContextPack:
    return pb.ContextPack(
        pack_id=str(pack.pack_id),
        scope_id=str(pack.scope_id),
        canonical_request_json=json.dumps(pack.canonical_request),
        content_json=json.dumps(pack.content),
        assembler_version=pack.assembler_version,
        created_at=to_timestamp(pack.created_at),
        expires_at=to_timestamp(pack.expires_at),
    )


KEY_STATES = {
    KeyState.CLAIMED: pb.IDEMPOTENCY_STATE_CLAIMED,
    KeyState.COMPLETED: pb.IDEMPOTENCY_STATE_COMPLETED,
    KeyState.IN_PROGRESS: pb.IDEMPOTENCY_STATE_IN_PROGRESS,
    KeyState.MISMATCH: pb.IDEMPOTENCY_STATE_MISMATCH,
}


def snapshot_to_proto(snapshot: Snapshot) -> pb.Snapshot:
    return pb.Snapshot(
        snapshot_id=str(snapshot.snapshot_id),
        scope_id=str(snapshot.scope_id),
        as_of=to_timestamp(snapshot.as_of),
        known_as_of=to_timestamp(snapshot.known_as_of),
        fact_count=snapshot.fact_count,
        source_count=snapshot.source_count,
        newest_source_observed_at=to_timestamp(snapshot.newest_source_observed_at),
        oldest_source_observed_at=to_timestamp(snapshot.oldest_source_observed_at),
        change_position=snapshot.change_position,
        assembler_version=snapshot.assembler_version,
        ontology_version=snapshot.ontology_version,
        policy_version=snapshot.policy_version,
        embedding_version=snapshot.embedding_version,
        index_version=snapshot.index_version,
        created_at=to_timestamp(snapshot.created_at),
    )
