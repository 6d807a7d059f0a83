"""A database role per service (compose/postgres/10-vera-roles.sh), checked alike for
compose and the chart: each schema and everything in it owned by its service's role, the
roles without any privilege beyond that, and each role refused every other schema."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import asyncpg
import pytest

from vera.commands import SERVICE_NAMES

# PostgreSQL's insufficient_privilege.
REFUSED = "42501"


async def assert_each_schema_is_its_roles(
        fetch: Callable[[str], Awaitable[list[asyncpg.Record]]]) -> None:
    """``fetch`` runs a query as an administrator in VERA's database."""
    owners = await fetch(
        "SELECT nspname, pg_get_userbyid(nspowner) AS owner FROM pg_namespace"
        " WHERE nspname IN ('identity', 'knowledge', 'retrieval', 'snapshot')")
    assert {r["nspname"]: r["owner"] for r in owners} == {
        s: f"vera_{s}" for s in SERVICE_NAMES}
    owned = await fetch(
        "SELECT n.nspname, pg_get_userbyid(c.relowner) AS owner FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN"
        " ('identity', 'knowledge', 'retrieval', 'snapshot')"
        " UNION ALL SELECT n.nspname, pg_get_userbyid(p.proowner) FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN"
        " ('identity', 'knowledge', 'retrieval', 'snapshot')")
    assert owned and all(r["owner"] == f"vera_{r['nspname']}" for r in owned)
    roles = await fetch(
        "SELECT rolname, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles"
        " WHERE rolname LIKE 'vera\\_%'")
    assert {r["rolname"] for r in roles} == {f"vera_{s}" for s in SERVICE_NAMES}
    assert not any(r["rolsuper"] or r["rolcreatedb"] or r["rolcreaterole"] for r in roles)
    # No role may create a schema, nor use another service's.
    privileges = await fetch(
        "SELECT r.rolname, n.nspname, has_schema_privilege(r.oid, n.oid, 'USAGE') AS usage,"
        " has_database_privilege(r.oid, current_database(), 'CREATE') AS create_schema"
        " FROM pg_roles r CROSS JOIN pg_namespace n WHERE r.rolname LIKE 'vera\\_%'"
        " AND n.nspname IN ('identity', 'knowledge', 'retrieval', 'snapshot')")
    assert len(privileges) == len(SERVICE_NAMES) ** 2
    for row in privileges:
        assert row["usage"] == (row["rolname"] == f"vera_{row['nspname']}"), dict(row)
        assert row["create_schema"] is False, dict(row)


async def assert_each_role_reads_only_its_schema(dsns: Mapping[str, str]) -> None:
    """Signed in with each service's own DSN: its own schema answers, every other is
    refused ``42501``."""
    assert set(dsns) == set(SERVICE_NAMES)
    for name, dsn in dsns.items():
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval("SELECT current_user") == f"vera_{name}"
            assert await conn.fetchval(f'SELECT count(*) FROM "{name}".schema_migrations') > 0
            for other in set(SERVICE_NAMES) - {name}:
                with pytest.raises(asyncpg.InsufficientPrivilegeError) as refused:
                    await conn.fetchval(f'SELECT count(*) FROM "{other}".schema_migrations')
                assert refused.value.sqlstate == REFUSED
        finally:
            await conn.close()
