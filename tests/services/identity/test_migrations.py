"""Identity's schema upgrade on a database that already holds data."""

from __future__ import annotations

import uuid

import asyncpg

from vera.db.migrate import migrate, migration_files

PACKAGE, SCHEMA = "vera.services.identity", "identity"
IDP, OTHER_IDP = "https://login.idp.test", "https://other.idp.test"


async def test_existing_emails_are_bound_to_the_issuer_that_verified_them(pg_dsn) -> None:
    before = [m for m in migration_files(PACKAGE) if m[0] < "0004"]
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(f"CREATE SCHEMA {SCHEMA}")
        await conn.execute(f"CREATE TABLE {SCHEMA}.schema_migrations (version text PRIMARY KEY,"
                           " applied_at timestamptz NOT NULL DEFAULT now())")
        for version, sql in before:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL search_path TO {SCHEMA}")
                await conn.execute(sql)
                await conn.execute(f"INSERT INTO {SCHEMA}.schema_migrations VALUES ($1)", version)
        alice, bob = uuid.uuid4(), uuid.uuid4()
        for principal, email, identities in (
            (alice, "alice@example.com", [(IDP, "a"), (OTHER_IDP, "a-2")]),
            (bob, "bob@example.com", [(OTHER_IDP, "b")]),
        ):
            await conn.execute(f"INSERT INTO {SCHEMA}.principals (principal_id, display_name,"
                               " kind) VALUES ($1, 'x', 'user')", principal)
            for issuer, subject in identities:  # the first one created linked the email
                await conn.execute(f"INSERT INTO {SCHEMA}.external_identities VALUES"
                                   " ($1, $2, $3)", issuer, subject, principal)
            await conn.execute(f"INSERT INTO {SCHEMA}.principal_emails (email, principal_id)"
                               " VALUES ($1, $2)", email, principal)

        assert await migrate(pg_dsn, SCHEMA, PACKAGE) == [
            v for v, _ in migration_files(PACKAGE) if v >= "0004"]
        rows = await conn.fetch(f"SELECT issuer, email, principal_id FROM {SCHEMA}.principal_emails"
                                " ORDER BY email")
    finally:
        await conn.close()
    assert [tuple(r) for r in rows] == [(IDP, "alice@example.com", alice),
                                        (OTHER_IDP, "bob@example.com", bob)]
