"""Identity rules: who a principal is, which scopes it reads, which project a call binds to.

Readability is one rule (ARCHITECTURE §Scopes): a principal reads its personal scope, the
projects it owns, and the projects of the workspaces it belongs to. A project the principal
cannot read and a project that does not exist are indistinguishable (PROJECT_OUT_OF_SCOPE).
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vera.errors import (
    AmbiguousProject,
    InvalidInput,
    ProjectOutOfScope,
    Unauthenticated,
    Unauthorized,
)
from vera.repository_identity import canonicalize
from vera.request_fields import as_uuid, parse_uuid
from vera.text import escape_hidden

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Personal scopes are named by the system; nobody may create a shared project that squats one.
PERSONAL_SLUG_PREFIX = "personal-"
LOCAL_DISPLAY_NAME = "local"
MAX_DISPLAY_NAME = 200
MAX_EXTERNAL_CLAIM = 512  # issuer, subject, email and quota keys


class ProjectKind(enum.StrEnum):
    PERSONAL = "personal"
    SHARED = "shared"


class WorkspaceRole(enum.StrEnum):
    OWNER = "owner"
    CURATOR = "curator"
    MEMBER = "member"


# Who curates a shared project besides its owner: these roles in the project's workspace.
CURATING_ROLES = frozenset({WorkspaceRole.OWNER, WorkspaceRole.CURATOR})


class PrincipalKind(enum.StrEnum):
    LOCAL = "local"
    USER = "user"


class Resolution(enum.Enum):
    SELECTED = "selected"
    SELECTION_REQUIRED = "selection_required"
    UNMAPPED = "unmapped"
    UNSUPPORTED_REPOSITORY = "unsupported_repository"
    PERSONAL_ONLY = "personal_only"


@dataclass(frozen=True)
class Principal:
    principal_id: uuid.UUID
    display_name: str
    personal_scope_id: uuid.UUID
    # Administrators manage users and workspaces. The local-dev principal counts as one.
    admin: bool = False
    # An administrator disabled the user: none of its credentials stands until re-enabled.
    disabled: bool = False


@dataclass(frozen=True)
class Project:
    project_id: uuid.UUID
    slug: str
    display_name: str
    kind: ProjectKind
    owner_principal_id: uuid.UUID
    workspace_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Scopes:
    personal_scope_id: uuid.UUID
    projects: list[Project]  # personal first, then by slug


@dataclass(frozen=True)
class RepositoryResolution:
    resolution: Resolution
    canonical_repository: str  # empty when not given or unsupported
    candidates: list[Project]


class IdentityStore(Protocol):
    """The persistence port; ``store.PgIdentityStore`` implements it."""

    async def ensure_principal(
        self,
        principal_id: uuid.UUID,
        display_name: str,
        kind: PrincipalKind,
        personal_slugs: Sequence[str],
    ) -> tuple[Principal, bool]:
        """Creates the principal and its personal project when missing; True when created."""
        ...

    async def get_principal(self, principal_id: uuid.UUID) -> Principal | None: ...

    async def readable_projects(self, principal_id: uuid.UUID) -> list[Project]:
        """Every project the principal reads, its personal scope first, then by slug."""
        ...

    async def create_shared_project(
        self, owner_principal_id: uuid.UUID, slug: str, display_name: str
    ) -> tuple[Project, bool]:
        """Inserts the project, or returns the one holding the slug with False."""
        ...

    async def get_project(self, project_id: uuid.UUID) -> Project | None: ...

    async def get_project_by_slug(self, slug: str) -> Project | None: ...

    async def member_role(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID
    ) -> WorkspaceRole | None: ...

    async def map_repository(
        self, project_id: uuid.UUID, canonical_repository: str, principal_id: uuid.UUID
    ) -> bool:
        """Stores the mapping; False when it already existed."""
        ...

    async def mapped_project_ids(
        self, canonical_repository: str, project_ids: Sequence[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Which of ``project_ids`` the repository is mapped to."""
        ...

    # MCP gateway: external identities and shared quota counters.

    async def ensure_external_principal(
        self,
        issuer: str,
        subject: str,
        verified_email: str | None,
        new_principal_id: uuid.UUID,
        display_name: str,
    ) -> tuple[uuid.UUID, bool]:
        """The principal mapped to issuer|subject; else the one holding ``verified_email``
        for this issuer; else ``new_principal_id``, created with its personal scope. True
        when created."""
        ...

    async def charge_quota(self, key: str, window_start: int, limit: int) -> bool:
        """Atomically counts one call unless the window holds ``limit``; drops older windows."""
        ...


def verified_email(value: str, field: str = "email") -> str:
    """The canonical (lower-case) form an email is stored and linked by."""
    email = value.strip().lower()
    if not email or len(email) > MAX_EXTERNAL_CLAIM or "@" not in email:
        raise InvalidInput(field)
    return email


def new_project_slug(value: str, field: str = "project") -> str:
    """A slug a new shared project may take: the SLUG shape, never a personal scope's."""
    slug = value.strip()
    if not SLUG.match(slug):
        raise InvalidInput(field)
    if slug.startswith(PERSONAL_SLUG_PREFIX):
        raise InvalidInput(field, reason="reserved_slug")
    return slug


def personal_slugs(principal_id: uuid.UUID) -> list[str]:
    """The personal scope's slug, and a collision-free fallback (two ids can share 8 chars)."""
    return [
        f"{PERSONAL_SLUG_PREFIX}{principal_id.hex[:8]}",
        f"{PERSONAL_SLUG_PREFIX}{principal_id.hex}",
    ]


class IdentityService:
    def __init__(self, store: IdentityStore) -> None:
        self._store = store

    async def ensure_local_principal(self, principal_id: str) -> tuple[Principal, bool]:
        pid = parse_uuid("principal_id", principal_id)
        return await self._store.ensure_principal(
            pid, LOCAL_DISPLAY_NAME, PrincipalKind.LOCAL, personal_slugs(pid)
        )

    async def get_principal(self, principal_id: str) -> Principal:
        principal = await self._store.get_principal(parse_uuid("principal_id", principal_id))
        if principal is None:
            raise InvalidInput("principal_id", reason="not_found")
        return principal

    async def ensure_external_principal(
        self, issuer: str, subject: str, email: str, email_verified: bool
    ) -> tuple[Principal, bool]:
        """JIT-maps a verified external identity. An email links an existing principal only
        when the identity provider asserted it verified, and only to an email recorded for
        that same issuer (another provider may let anyone claim any address); otherwise
        only issuer|subject links."""
        if not issuer or len(issuer) > MAX_EXTERNAL_CLAIM:
            raise InvalidInput("issuer")
        if not subject or len(subject) > MAX_EXTERNAL_CLAIM:
            raise InvalidInput("subject")
        linking_email = verified_email(email) if email_verified and email.strip() else None
        # An issuer's subject is not screened as a typed name is: shown, never hidden.
        display_name = escape_hidden(linking_email or subject)[:MAX_DISPLAY_NAME]
        pid, created = await self._store.ensure_external_principal(
            issuer, subject, linking_email, uuid.uuid4(), display_name
        )
        principal = await self.get_principal(str(pid))
        if principal.disabled:
            raise Unauthenticated()  # a disabled user's external logins stand no more
        return principal, created

    async def charge_quota(self, key: str, window_start: int, limit: int) -> bool:
        if not key or len(key) > MAX_EXTERNAL_CLAIM:
            raise InvalidInput("key")
        if window_start < 0:
            raise InvalidInput("window_start")
        if limit < 1:
            raise InvalidInput("limit")
        return await self._store.charge_quota(key, window_start, limit)

    async def resolve_scopes(self, principal_id: str) -> Scopes:
        pid = parse_uuid("principal_id", principal_id)
        projects, personal = await self._readable(pid)
        return Scopes(personal.project_id, projects)

    async def ensure_project(
        self, principal_id: str, slug: str, display_name: str
    ) -> tuple[Project, bool]:
        pid = parse_uuid("principal_id", principal_id)
        slug = new_project_slug(slug)
        display_name = display_name.strip() or slug
        if len(display_name) > MAX_DISPLAY_NAME:
            raise InvalidInput("display_name")
        readable, _ = await self._readable(pid)
        project, created = await self._store.create_shared_project(pid, slug, display_name)
        if not created and project.project_id not in {p.project_id for p in readable}:
            raise ProjectOutOfScope()
        return project, created

    async def resolve_project(self, principal_id: str, project: str) -> Project:
        pid = parse_uuid("principal_id", principal_id)
        readable, personal = await self._readable(pid)
        reference = project.strip()
        if reference:
            project_id = as_uuid(reference)
            for candidate in readable:
                if candidate.slug == reference or candidate.project_id == project_id:
                    return candidate
            raise ProjectOutOfScope()
        shared = [p for p in readable if p.kind is ProjectKind.SHARED]
        if len(shared) == 1:
            return shared[0]
        if not shared:
            return personal
        raise AmbiguousProject(candidates=[p.slug for p in shared])

    async def authorize_curator(
        self, principal_id: str, project: str, field: str = "project"
    ) -> Project:
        """The shared project, when the principal owns it or owns/curates its workspace.

        The one home of the curator rule (REST curation, the console, ingest, repository
        mapping). A project the principal cannot read is PROJECT_OUT_OF_SCOPE, as for every
        read; a readable one it may not curate is UNAUTHORIZED naming the role it lacks.
        """
        pid = parse_uuid("principal_id", principal_id)
        if not project.strip():
            raise InvalidInput(field, reason="required")
        found = await self.resolve_project(principal_id, project)
        if found.kind is not ProjectKind.SHARED:
            raise InvalidInput(field, "only shared projects are curated", reason="not_shared")
        if found.owner_principal_id == pid:
            return found
        if found.workspace_id is not None:
            role = await self._store.member_role(found.workspace_id, pid)
            if role in CURATING_ROLES:
                return found
        raise Unauthorized(required_role="curator")

    async def map_repository(
        self, principal_id: str, project_id: str, repository: str
    ) -> tuple[str, bool]:
        # Repositories select shared projects; the personal scope is never a candidate.
        project = await self.authorize_curator(principal_id, project_id, "project_id")
        canonical = canonicalize(repository)
        if canonical is None:
            raise InvalidInput("repository", reason="unsupported_repository")
        created = await self._store.map_repository(
            project.project_id, canonical, parse_uuid("principal_id", principal_id))
        return canonical, created

    async def resolve_repository(self, principal_id: str, repository: str) -> RepositoryResolution:
        pid = parse_uuid("principal_id", principal_id)
        readable, _ = await self._readable(pid)
        shared = [p for p in readable if p.kind is ProjectKind.SHARED]
        given = repository.strip()
        canonical = canonicalize(given) if given else None
        canonical_text = canonical or ""
        if not shared:
            return RepositoryResolution(Resolution.PERSONAL_ONLY, canonical_text, [])
        if not given:
            if len(shared) == 1:
                return RepositoryResolution(Resolution.SELECTED, "", shared)
            return RepositoryResolution(Resolution.SELECTION_REQUIRED, "", shared)
        if canonical is None:
            return RepositoryResolution(Resolution.UNSUPPORTED_REPOSITORY, "", [])
        mapped = await self._store.mapped_project_ids(canonical, [p.project_id for p in shared])
        matches = [p for p in shared if p.project_id in mapped]
        if len(matches) == 1:
            return RepositoryResolution(Resolution.SELECTED, canonical, matches)
        if matches:
            return RepositoryResolution(Resolution.SELECTION_REQUIRED, canonical, matches)
        return RepositoryResolution(Resolution.UNMAPPED, canonical, [])

    async def _readable(self, pid: uuid.UUID) -> tuple[list[Project], Project]:
        """The readable projects and the personal scope; an unknown principal is invalid input."""
        projects = await self._store.readable_projects(pid)
        personal = next(
            (p for p in projects if p.kind is ProjectKind.PERSONAL and p.owner_principal_id == pid),
            None,
        )
        if personal is None:
            # Every principal has a personal scope, so none means the principal is unknown.
            raise InvalidInput("principal_id", reason="not_found")
        return projects, personal
