"""asyncpg implementation of the identity store (schema ``identity``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from vera.services.identity.domain import Principal, PrincipalKind, Project, ProjectKind

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
            name = await conn.fetchval(
                "SELECT display_name FROM principals WHERE principal_id = $1", principal_id
            )
            personal_id = await conn.fetchval(
                "SELECT project_id FROM projects WHERE owner_principal_id = $1"
                " AND kind = 'personal'",
                principal_id,
            )
            if personal_id is None:
                personal_id = await self._insert_personal(conn, principal_id, personal_slugs)
        return Principal(principal_id, name, personal_id), inserted is not None

    @staticmethod
    async def _insert_personal(
        conn: asyncpg.Connection, principal_id: uuid.UUID, slugs: Sequence[str]
    ) -> uuid.UUID:
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

    async def get_principal(self, principal_id: uuid.UUID) -> Principal | None:
        row = await self._pool.fetchrow(
            "SELECT p.principal_id, p.display_name, s.project_id AS personal_scope_id"
            " FROM principals p JOIN projects s"
            "   ON s.owner_principal_id = p.principal_id AND s.kind = 'personal'"
            " WHERE p.principal_id = $1",
            principal_id,
        )
        if row is None:
            return None
        return Principal(row["principal_id"], row["display_name"], row["personal_scope_id"])

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

    # Workspace administration. No RPC exposes it yet (see the contract); tests and
    # operators use it to place projects in workspaces and add members.

    async def create_workspace(
        self, owner_principal_id: uuid.UUID, slug: str, display_name: str = ""
    ) -> uuid.UUID:
        workspace_id = uuid.uuid4()
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO workspaces (workspace_id, slug, display_name, owner_principal_id)"
                " VALUES ($1, $2, $3, $4)",
                workspace_id,
                slug,
                display_name or slug,
                owner_principal_id,
            )
            await conn.execute(
                "INSERT INTO workspace_members (workspace_id, principal_id, role)"
                " VALUES ($1, $2, 'owner')",
                workspace_id,
                owner_principal_id,
            )
        return workspace_id

    async def add_workspace_member(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID, role: str = "member"
    ) -> None:
        await self._pool.execute(
            "INSERT INTO workspace_members (workspace_id, principal_id, role)"
            " VALUES ($1, $2, $3)"
            " ON CONFLICT (workspace_id, principal_id) DO UPDATE SET role = EXCLUDED.role",
            workspace_id,
            principal_id,
            role,
        )

    async def assign_project_workspace(
        self, project_id: uuid.UUID, workspace_id: uuid.UUID
    ) -> None:
        await self._pool.execute(
            "UPDATE projects SET workspace_id = $2 WHERE project_id = $1 AND kind = 'shared'",
            project_id,
            workspace_id,
        )
