"""A failure inside identity is logged for operators without the principal id it
concerns (logs never carry principal ids, tokens or queries)."""

from __future__ import annotations

import logging
import uuid

import asyncpg
import pytest

from vera.errors import VeraError
from vera.identity.v1 import identity_pb2 as pb
from vera.services.identity.domain import personal_slugs


async def test_an_internal_failure_is_logged_without_the_principal_id(
    identity, pg_dsn, caplog
) -> None:
    owner = str(uuid.uuid4())
    await identity.stub.EnsureLocalPrincipal(pb.EnsureLocalPrincipalRequest(principal_id=owner))
    victim = uuid.uuid4()
    conn = await asyncpg.connect(pg_dsn)
    try:  # both personal slugs of the new principal are already taken
        for slug in personal_slugs(victim):
            await conn.execute(
                "INSERT INTO identity.projects (project_id, slug, display_name, kind,"
                " owner_principal_id) VALUES ($1, $2, $2, 'shared', $3)",
                uuid.uuid4(), slug, uuid.UUID(owner))
    finally:
        await conn.close()
    with caplog.at_level(logging.DEBUG), pytest.raises(VeraError) as caught:
        await identity.stub.EnsureLocalPrincipal(
            pb.EnsureLocalPrincipalRequest(principal_id=str(victim)))
    assert caught.value.reason == "INTERNAL"
    assert "RuntimeError" in caplog.text
    assert str(victim) not in caplog.text and victim.hex not in caplog.text
