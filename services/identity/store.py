"""asyncpg implementation of identity's domain port (schema ``identity``): principals,
projects, repository mappings, external identities and quota counters."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from vera.services.identity.domain import (
    Principal,
    PrincipalKind,
    Project,
    ProjectKind,
    WorkspaceRole,
    personal_slugs,
)

_PROJECT_COLUMNS = "project_id, slug, display_name, kind, owner_principal_id, workspace_id"


def _project(row: asyncpg.Record) -> Project:
    return Project(
        project_id=row["project_id"],
        slug=row["slug"],
        display_name=row["display_name"],
        kind=ProjectKind(row["kind"]),
        owner_principal_id=row["owner_principal_id"],
        workspace_id=row["workspace_id"],
    )


async def insert_personal_project(
    conn: asyncpg.Connection, principal_id: uuid.UUID, slugs: Sequence[str]
) -> uuid.UUID:
    """Creates the principal's personal project under the first free slug, inside the
    caller's transaction (a principal and its personal scope are created together)."""
    for slug in slugs:
        project_id = await conn.fetchval(
            "INSERT INTO projects (project_id, slug, display_name, kind, owner_principal_id)"
            " VALUES ($1, $2, $2, 'personal', $3) ON CONFLICT DO NOTHING RETURNING project_id",
            uuid.uuid4(),
            slug,
            principal_id,
        )
        if project_id is not None:
            return project_id
        # The slug is taken, or a concurrent call created the personal scope first.
        existing = await conn.fetchval(
            "SELECT project_id FROM projects WHERE owner_principal_id = $1"
            " AND kind = 'personal'",
            principal_id,
        )
        if existing is not None:
            return existing
    raise RuntimeError(f"no free personal slug for principal {principal_id}")


class PgIdentityStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def ensure_principal(
        self,
        principal_id: uuid.UUID,
        display_name: str,
        kind: PrincipalKind,
        personal_slugs: Sequence[str],
    ) -> tuple[Principal, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            # A concurrent creator's uncommitted row blocks this insert until it commits,
            # so exactly one caller sees created=True.
            inserted = await conn.fetchval(
                "INSERT INTO principals (principal_id, display_name, kind) VALUES ($1, $2, $3)"
                " ON CONFLICT DO NOTHING RETURNING principal_id",
                principal_id,
                display_name,
                kind.value,
            )
            row = await conn.fetchrow(
                "SELECT display_name, (admin OR kind = 'local') AS admin FROM principals"
                " WHERE principal_id = $1",
                principal_id,
            )
            name = row["display_name"]
            personal_id = await conn.fetchval(
                "SELECT project_id FROM projects WHERE owner_principal_id = $1"
                " AND kind = 'personal'",
                principal_id,
            )
            if personal_id is None:
                personal_id = await insert_personal_project(conn, principal_id, personal_slugs)
        return Principal(principal_id, name, personal_id, row["admin"]), inserted is not None

    async def get_principal(self, principal_id: uuid.UUID) -> Principal | None:
        row = await self._pool.fetchrow(
            "SELECT p.principal_id, p.display_name, s.project_id AS personal_scope_id,"
            "       (p.admin OR p.kind = 'local') AS admin, p.disabled_at IS NOT NULL AS disabled"
            " FROM principals p JOIN projects s"
            "   ON s.owner_principal_id = p.principal_id AND s.kind = 'personal'"
            " WHERE p.principal_id = $1",
            principal_id,
        )
        if row is None:
            return None
        return Principal(
            row["principal_id"],
            row["display_name"],
            row["personal_scope_id"],
            row["admin"],
            row["disabled"],
        )

    async def readable_projects(self, principal_id: uuid.UUID) -> list[Project]:
        rows = await self._pool.fetch(
            f"SELECT {_PROJECT_COLUMNS} FROM projects p"
            " WHERE p.owner_principal_id = $1"
            "    OR EXISTS (SELECT 1 FROM workspace_members m"
            "               WHERE m.workspace_id = p.workspace_id AND m.principal_id = $1)"
            " ORDER BY (p.kind = 'personal' AND p.owner_principal_id = $1) DESC, p.slug",
            principal_id,
        )
        return [_project(row) for row in rows]

    async def create_shared_project(
        self, owner_principal_id: uuid.UUID, slug: str, display_name: str
    ) -> tuple[Project, bool]:
        row = await self._pool.fetchrow(
            "INSERT INTO projects (project_id, slug, display_name, kind, owner_principal_id)"
            " VALUES ($1, $2, $3, 'shared', $4) ON CONFLICT (slug) DO NOTHING"
            f" RETURNING {_PROJECT_COLUMNS}",
            uuid.uuid4(),
            slug,
            display_name,
            owner_principal_id,
        )
        if row is not None:
            return _project(row), True
        row = await self._pool.fetchrow(
            f"SELECT {_PROJECT_COLUMNS} FROM projects WHERE slug = $1", slug
        )
        return _project(row), False

    async def get_project(self, project_id: uuid.UUID) -> Project | None:
        row = await self._pool.fetchrow(
            f"SELECT {_PROJECT_COLUMNS} FROM projects WHERE project_id = $1", project_id
        )
        return _project(row) if row else None

    async def get_project_by_slug(self, slug: str) -> Project | None:
        row = await self._pool.fetchrow(
            f"SELECT {_PROJECT_COLUMNS} FROM projects WHERE slug = $1", slug
        )
        return _project(row) if row else None

    async def member_role(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID
    ) -> WorkspaceRole | None:
        role = await self._pool.fetchval(
            "SELECT role FROM workspace_members WHERE workspace_id = $1 AND principal_id = $2",
            workspace_id,
            principal_id,
        )
        return WorkspaceRole(role) if role else None

    async def map_repository(
        self, project_id: uuid.UUID, canonical_repository: str, principal_id: uuid.UUID
    ) -> bool:
        inserted = await self._pool.fetchval(
            "INSERT INTO repository_mappings (project_id, canonical_repository, created_by)"
            " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING project_id",
            project_id,
            canonical_repository,
            principal_id,
        )
        return inserted is not None

    async def mapped_project_ids(
        self, canonical_repository: str, project_ids: Sequence[uuid.UUID]
    ) -> set[uuid.UUID]:
        rows = await self._pool.fetch(
            "SELECT project_id FROM repository_mappings"
            " WHERE canonical_repository = $1 AND project_id = ANY($2::uuid[])",
            canonical_repository,
            list(project_ids),
        )
        return {row["project_id"] for row in rows}

    # MCP gateway: external identities and shared quota counters.

    async def ensure_external_principal(
        self,
        issuer: str,
        subject: str,
        verified_email: str | None,
        new_principal_id: uuid.UUID,
        display_name: str,
    ) -> tuple[uuid.UUID, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            # Serializes concurrent first logins of one identity, so it maps exactly once.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{issuer}|{subject}"
            )
            mapped = await conn.fetchval(
                "SELECT principal_id FROM external_identities WHERE issuer = $1 AND subject = $2",
                issuer,
                subject,
            )
            if mapped is not None:
                return mapped, False
            linked = None
            if verified_email is not None:
                linked = await conn.fetchval(
                    "SELECT principal_id FROM principal_emails WHERE issuer = $1 AND email = $2",
                    issuer,
                    verified_email,
                )
            created = linked is None
            principal_id = new_principal_id if linked is None else linked
            if created:
                await conn.execute(
                    "INSERT INTO principals (principal_id, display_name, kind)"
                    " VALUES ($1, $2, 'user')",
                    principal_id,
                    display_name,
                )
                await insert_personal_project(conn, principal_id, personal_slugs(principal_id))
                if verified_email is not None:
                    await conn.execute(
                        "INSERT INTO principal_emails (issuer, email, principal_id)"
                        " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        issuer,
                        verified_email,
                        principal_id,
                    )
            await conn.execute(
                "INSERT INTO external_identities (issuer, subject, principal_id)"
                " VALUES ($1, $2, $3)",
                issuer,
                subject,
                principal_id,
            )
        return principal_id, created

    async def charge_quota(self, key: str, window_start: int, limit: int) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            # One statement: concurrent replicas serialize on the row, so the count never
            # passes the limit, and a refused charge changes nothing.
            count = await conn.fetchval(
                "INSERT INTO quota_counters AS q (key, window_start, count) VALUES ($1, $2, 1)"
                " ON CONFLICT (key, window_start) DO UPDATE SET count = q.count + 1"
                " WHERE q.count < $3 RETURNING count",
                key,
                window_start,
                limit,
            )
            await conn.execute(
                "DELETE FROM quota_counters WHERE key = $1 AND window_start < $2",
                key,
                window_start,
            )
        return count is not None
