"""asyncpg implementation of the account port (schema ``identity``): users, API keys,
workspaces, memberships and invitations. ``accounts.py`` decides who may call these."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping, Sequence

import asyncpg

from vera.db import audit
from vera.errors import InvalidInput
from vera.services.identity.accounts import (
    AUTH_FAILED,
    ApiKey,
    ApiKeyRecord,
    Invitation,
    VerifiedEmail,
    Workspace,
    WorkspaceMember,
)
from vera.services.identity.domain import Principal, WorkspaceRole
from vera.services.identity.store import insert_personal_project


class PgAccountStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        # Failures and refusals since the last flush, per action, source and reason
        # (flush_auth_failures).
        self._failures: Counter[tuple[str, str, str]] = Counter()

    async def audit(self, actor: str, action: str, targets: Mapping[str, str]) -> None:
        await audit.append(self._pool, actor, action, targets)

    def count_auth_failure(self, reason: str) -> None:
        self._failures[(AUTH_FAILED, "", reason)] += 1

    def count_refusals(self, action: str, reason: str, count: int, source: str) -> None:
        self._failures[(action, source, reason)] += count

    async def flush_auth_failures(self, window_seconds: float) -> None:
        """One record per action, source and reason for the failures and refusals counted
        since the last flush."""
        counted, self._failures = self._failures, Counter()
        for (action, source, reason), count in sorted(counted.items()):
            targets = {"reason": reason, "count": str(count),
                       "window_seconds": str(window_seconds)}
            if source:
                targets["source"] = source
            await audit.append(self._pool, "-", action, targets)

    # Tests also call the workspace writes directly, to set up workspaces without the
    # consent flow.

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
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO workspace_members (workspace_id, principal_id, role)"
                " VALUES ($1, $2, $3)"
                " ON CONFLICT (workspace_id, principal_id) DO UPDATE SET role = EXCLUDED.role",
                workspace_id,
                principal_id,
                role,
            )
            # A direct add supersedes a pending invitation.
            await conn.execute(
                "DELETE FROM workspace_invitations WHERE workspace_id = $1 AND principal_id = $2",
                workspace_id,
                principal_id,
            )

    async def assign_project_workspace(
        self, project_id: uuid.UUID, workspace_id: uuid.UUID
    ) -> None:
        await self._pool.execute(
            "UPDATE projects SET workspace_id = $2 WHERE project_id = $1 AND kind = 'shared'",
            project_id,
            workspace_id,
        )

    async def create_user(
        self,
        principal_id: uuid.UUID,
        display_name: str,
        admin: bool,
        slugs: Sequence[str],
        *,
        only_if_no_admin: bool,
        email: VerifiedEmail | None = None,
    ) -> Principal | None:
        async with self._pool.acquire() as conn, conn.transaction():
            if only_if_no_admin:
                # Serializes first-admin bootstraps, so exactly one can succeed.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('admin', 0))")
                if await conn.fetchval("SELECT EXISTS (SELECT 1 FROM principals WHERE admin)"):
                    return None
            await conn.execute(
                "INSERT INTO principals (principal_id, display_name, kind, admin)"
                " VALUES ($1, $2, 'user', $3)",
                principal_id,
                display_name,
                admin,
            )
            personal_id = await insert_personal_project(conn, principal_id, slugs)
            if email is not None:
                recorded = await conn.fetchval(
                    "INSERT INTO principal_emails (issuer, email, principal_id)"
                    " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING principal_id",
                    email.issuer,
                    email.email,
                    principal_id,
                )
                if recorded is None:
                    # Rolls the whole user back: an email links exactly one principal.
                    raise InvalidInput("email", reason="taken")
        return Principal(principal_id, display_name, personal_id, admin)

    async def insert_api_key(
        self, principal_id: uuid.UUID, key_id: str, secret_sha256: bytes, label: str
    ) -> ApiKey:
        row = await self._pool.fetchrow(
            "INSERT INTO api_keys (key_id, principal_id, secret_sha256, label)"
            " VALUES ($1, $2, $3, $4) RETURNING key_id, label, created_at, revoked_at",
            key_id,
            principal_id,
            secret_sha256,
            label,
        )
        return _api_key(row)

    async def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        row = await self._pool.fetchrow(
            "SELECT key_id, label, created_at, revoked_at, principal_id, secret_sha256"
            " FROM api_keys WHERE key_id = $1",
            key_id,
        )
        if row is None:
            return None
        return ApiKeyRecord(_api_key(row), row["principal_id"], bytes(row["secret_sha256"]))

    async def list_api_keys(self, principal_id: uuid.UUID, offset: int, limit: int) -> list[ApiKey]:
        rows = await self._pool.fetch(
            "SELECT key_id, label, created_at, revoked_at FROM api_keys WHERE principal_id = $1"
            " ORDER BY created_at DESC, key_id OFFSET $2 LIMIT $3",
            principal_id,
            offset,
            limit,
        )
        return [_api_key(row) for row in rows]

    async def list_users(self, offset: int, limit: int) -> list[Principal]:
        rows = await self._pool.fetch(
            "SELECT p.principal_id, p.display_name, s.project_id AS personal_scope_id,"
            "       p.admin, p.disabled_at IS NOT NULL AS disabled"
            " FROM principals p JOIN projects s"
            "   ON s.owner_principal_id = p.principal_id AND s.kind = 'personal'"
            " WHERE p.kind = 'user'"
            " ORDER BY p.created_at, p.principal_id OFFSET $1 LIMIT $2",
            offset,
            limit,
        )
        return [
            Principal(r["principal_id"], r["display_name"], r["personal_scope_id"], r["admin"],
                      r["disabled"])
            for r in rows
        ]

    async def set_disabled(self, principal_id: uuid.UUID, disabled: bool) -> bool:
        changed = await self._pool.fetchval(
            "UPDATE principals SET disabled_at = CASE WHEN $2 THEN now() END"
            " WHERE principal_id = $1 AND kind = 'user' AND (disabled_at IS NOT NULL) <> $2"
            " RETURNING principal_id",
            principal_id,
            disabled,
        )
        return changed is not None

    async def revoke_api_key(self, principal_id: uuid.UUID, key_id: str) -> bool | None:
        async with self._pool.acquire() as conn, conn.transaction():
            revoked_at = await conn.fetchrow(
                "SELECT revoked_at FROM api_keys WHERE key_id = $1 AND principal_id = $2"
                " FOR UPDATE",
                key_id,
                principal_id,
            )
            if revoked_at is None:
                return None
            if revoked_at["revoked_at"] is not None:
                return False
            await conn.execute(
                "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1", key_id
            )
            return True

    async def create_workspace_unique(
        self, owner_principal_id: uuid.UUID, slug: str, display_name: str
    ) -> uuid.UUID | None:
        try:
            return await self.create_workspace(owner_principal_id, slug, display_name)
        except asyncpg.UniqueViolationError:
            return None

    async def get_workspace(self, workspace_id: uuid.UUID) -> Workspace | None:
        row = await self._pool.fetchrow(
            "SELECT workspace_id, slug, display_name, owner_principal_id FROM workspaces"
            " WHERE workspace_id = $1",
            workspace_id,
        )
        return _workspace(row) if row else None

    async def remove_workspace_member(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID
    ) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            member = await conn.fetchval(
                "DELETE FROM workspace_members WHERE workspace_id = $1 AND principal_id = $2"
                " RETURNING principal_id",
                workspace_id,
                principal_id,
            )
            invited = await conn.fetchval(
                "DELETE FROM workspace_invitations WHERE workspace_id = $1 AND principal_id = $2"
                " RETURNING principal_id",
                workspace_id,
                principal_id,
            )
        return member is not None or invited is not None

    async def invite_workspace_member(
        self,
        workspace_id: uuid.UUID,
        principal_id: uuid.UUID,
        role: str,
        inviter_principal_id: uuid.UUID,
    ) -> Invitation:
        row = await self._pool.fetchrow(
            "WITH i AS ("
            "  INSERT INTO workspace_invitations"
            "    (invitation_id, workspace_id, principal_id, role, inviter_principal_id)"
            "  VALUES ($1, $2, $3, $4, $5)"
            "  ON CONFLICT (workspace_id, principal_id) DO UPDATE SET role = EXCLUDED.role,"
            "    inviter_principal_id = EXCLUDED.inviter_principal_id, created_at = now()"
            "  RETURNING *)"
            f" SELECT {_INVITATION_COLUMNS} FROM i JOIN workspaces w USING (workspace_id)",
            uuid.uuid4(),
            workspace_id,
            principal_id,
            role,
            inviter_principal_id,
        )
        return _invitation(row)

    async def list_invitations(
        self, principal_id: uuid.UUID, offset: int, limit: int
    ) -> list[Invitation]:
        rows = await self._pool.fetch(
            f"SELECT {_INVITATION_COLUMNS} FROM workspace_invitations i"
            " JOIN workspaces w USING (workspace_id) WHERE i.principal_id = $1"
            " ORDER BY i.created_at, i.invitation_id OFFSET $2 LIMIT $3",
            principal_id,
            offset,
            limit,
        )
        return [_invitation(row) for row in rows]

    async def accept_invitation(
        self, principal_id: uuid.UUID, invitation_id: uuid.UUID
    ) -> tuple[Workspace, WorkspaceMember] | None:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "DELETE FROM workspace_invitations"
                " WHERE invitation_id = $1 AND principal_id = $2"
                " RETURNING workspace_id, role, inviter_principal_id",
                invitation_id,
                principal_id,
            )
            if row is None:
                return None
            # An invitation carries its inviter's authority: once the inviter is no longer an
            # owner, it is withdrawn (the delete above commits) instead of accepted.
            if await conn.fetchval(
                "SELECT 1 FROM workspace_members WHERE workspace_id = $1"
                " AND principal_id = $2 AND role = 'owner'",
                row["workspace_id"],
                row["inviter_principal_id"],
            ) is None:
                return None
            # A concurrent direct add may have made it a member already; that role stays.
            role = await conn.fetchval(
                "INSERT INTO workspace_members (workspace_id, principal_id, role)"
                " VALUES ($1, $2, $3)"
                " ON CONFLICT (workspace_id, principal_id)"
                " DO UPDATE SET role = workspace_members.role"
                " RETURNING role",
                row["workspace_id"],
                principal_id,
                row["role"],
            )
            workspace = await conn.fetchrow(
                "SELECT workspace_id, slug, display_name, owner_principal_id FROM workspaces"
                " WHERE workspace_id = $1",
                row["workspace_id"],
            )
            name = await conn.fetchval(
                "SELECT display_name FROM principals WHERE principal_id = $1", principal_id
            )
        return _workspace(workspace), WorkspaceMember(principal_id, WorkspaceRole(role), name)

    async def decline_invitation(
        self, principal_id: uuid.UUID, invitation_id: uuid.UUID
    ) -> Invitation | None:
        row = await self._pool.fetchrow(
            "WITH i AS (DELETE FROM workspace_invitations"
            "  WHERE invitation_id = $1 AND principal_id = $2 RETURNING *)"
            f" SELECT {_INVITATION_COLUMNS} FROM i JOIN workspaces w USING (workspace_id)",
            invitation_id,
            principal_id,
        )
        return _invitation(row) if row else None

    async def list_workspace_members(
        self, workspace_id: uuid.UUID, offset: int, limit: int
    ) -> list[WorkspaceMember]:
        rows = await self._pool.fetch(
            "SELECT m.principal_id, m.role, p.display_name"
            " FROM workspace_members m JOIN principals p USING (principal_id)"
            " WHERE m.workspace_id = $1"
            " ORDER BY m.principal_id OFFSET $2 LIMIT $3",
            workspace_id,
            offset,
            limit,
        )
        return [
            WorkspaceMember(row["principal_id"], WorkspaceRole(row["role"]), row["display_name"])
            for row in rows
        ]


_INVITATION_COLUMNS = (
    "i.invitation_id, i.workspace_id, w.slug, w.display_name, w.owner_principal_id,"
    " i.principal_id, i.role, i.inviter_principal_id, i.created_at"
)


def _workspace(row: asyncpg.Record) -> Workspace:
    return Workspace(
        row["workspace_id"], row["slug"], row["display_name"], row["owner_principal_id"]
    )


def _invitation(row: asyncpg.Record) -> Invitation:
    return Invitation(
        row["invitation_id"],
        _workspace(row),
        row["principal_id"],
        WorkspaceRole(row["role"]),
        row["inviter_principal_id"],
        row["created_at"],
    )


def _api_key(row: asyncpg.Record) -> ApiKey:
    return ApiKey(row["key_id"], row["label"], row["created_at"], row["revoked_at"])
