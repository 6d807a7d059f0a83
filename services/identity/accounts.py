"""Account rules: users, administrators, API keys, workspaces and memberships.

Who may do what:
- Anyone may self-register through ``create_user`` with no actor (the REST API allows it
  only on open deployments). The very first administrator may be created with no actor
  (``vera admin create-user --admin``); after that only an administrator creates one.
- An API key belongs to one principal. Its secret is shown once; only a SHA-256 digest of
  the whole key is stored, compared in constant time. An MCP token minted with a key names
  it, and stands only while the key does (``check_credential``).
- An administrator creating a user may record a verified email for it, valid for one
  issuer: the administrator vouches for it, so an external identity of that issuer
  asserting that email links to the user. Self-registration records none: anyone could
  claim someone else's address and receive that person's first external login.
- Any principal may create a workspace it owns; an administrator may name another owner.
  Owners (and administrators) manage members and attach projects they own (an
  administrator: any shared project); attaching a slug no project holds creates that
  shared project, owned by the actor, so a team deployment's projects come into being
  through the workspace they belong to. A workspace the actor is not a member of behaves
  like a missing one (NOT_FOUND), for members and non-members alike.
- Membership needs the member's consent: an owner only invites a principal that is not a
  member yet, and the invitee joins when it accepts (it reads nothing of the workspace
  before). Administrators add members directly. Another principal's invitation behaves
  like a missing one (NOT_FOUND).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol

from vera.errors import InvalidInput, NotFound, ProjectOutOfScope, Unauthenticated, Unauthorized
from vera.page_tokens import decode_position, encode_position
from vera.request_fields import as_uuid, page_size, parse_uuid
from vera.services.identity.domain import (
    MAX_DISPLAY_NAME,
    MAX_EXTERNAL_CLAIM,
    PERSONAL_SLUG_PREFIX,
    SLUG,
    IdentityStore,
    Principal,
    Project,
    ProjectKind,
    WorkspaceRole,
    new_project_slug,
    personal_slugs,
    verified_email,
)
from vera.text import codepoint, first_hidden

API_KEY_PREFIX = "vera_"
_API_KEY = re.compile(r"^vera_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_KEY_ID = re.compile(r"^[0-9a-f]{16}$")
MAX_LABEL = 200
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


# What the audit trail records of these rules (vera.db.audit), one spelling each.
API_KEY_MINTED = "api_key.minted"
API_KEY_REVOKED = "api_key.revoked"
USER_CREATED = "user.created"
MEMBER_SET = "workspace_member.set"
MEMBER_REMOVED = "workspace_member.removed"
AUTH_FAILED = "authentication.failed"
USER_DISABLED = "user.disabled"
USER_ENABLED = "user.enabled"
MCP_TOKEN_MINTED = "mcp_token.minted"
# Refusals a front (gateway, REST API) counted; recorded per reason and interval.
AUTHORIZATION_REFUSED = "authorization.refused"
QUOTA_REFUSED = "quota.refused"
REFUSALS = frozenset({AUTHORIZATION_REFUSED, QUOTA_REFUSED})
REFUSAL_SOURCES = frozenset({"gateway", "api"})
MAX_REFUSAL_COUNTS = 64
LOCAL_KEY_ID = "local"
_REASON = re.compile(r"^[a-z0-9_.:-]{1,64}$")


@dataclass(frozen=True)
class Workspace:
    workspace_id: uuid.UUID
    slug: str
    display_name: str
    owner_principal_id: uuid.UUID


@dataclass(frozen=True)
class WorkspaceMember:
    principal_id: uuid.UUID
    role: WorkspaceRole
    display_name: str = ""


@dataclass(frozen=True)
class Invitation:
    invitation_id: uuid.UUID
    workspace: Workspace
    principal_id: uuid.UUID
    role: WorkspaceRole
    inviter_principal_id: uuid.UUID
    created_at: datetime


@dataclass(frozen=True)
class VerifiedEmail:
    """An email an administrator vouches for, valid for external identities of ``issuer``."""

    issuer: str
    email: str


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    label: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class ApiKeyRecord:
    key: ApiKey
    principal_id: uuid.UUID
    secret_sha256: bytes


class CredentialState(Enum):
    """Whether the API key an MCP token was minted from still stands."""

    ACTIVE = "active"
    KEY_REVOKED = "key_revoked"
    PRINCIPAL_DISABLED = "principal_disabled"


class AccountStore(Protocol):
    async def audit(self, actor: str, action: str, targets: Mapping[str, str]) -> None: ...

    def count_auth_failure(self, reason: str) -> None:
        """Counted, not written: a flood of failures becomes one record per reason and
        interval."""
        ...

    def count_refusals(self, action: str, reason: str, count: int, source: str) -> None:
        """Counted like ``count_auth_failure``, per action, source and reason."""
        ...

    """The persistence port for accounts; ``account_store.PgAccountStore`` implements it.
    Principals and projects are read through identity's own port (``domain.IdentityStore``)."""

    async def create_user(
        self, principal_id: uuid.UUID, display_name: str, admin: bool, slugs: Sequence[str],
        *, only_if_no_admin: bool, email: VerifiedEmail | None = None,
    ) -> Principal | None:
        """Inserts the user, its personal scope and ``email``; None when ``only_if_no_admin``
        and an administrator already exists (checked under a lock, so only one first admin).
        Raises ``InvalidInput("email", reason="taken")`` when the issuer's email is recorded
        for another principal."""
        ...

    async def insert_api_key(
        self, principal_id: uuid.UUID, key_id: str, secret_sha256: bytes, label: str
    ) -> ApiKey: ...

    async def get_api_key(self, key_id: str) -> ApiKeyRecord | None: ...

    async def list_api_keys(
        self, principal_id: uuid.UUID, offset: int, limit: int
    ) -> list[ApiKey]: ...

    async def revoke_api_key(self, principal_id: uuid.UUID, key_id: str) -> bool | None:
        """True when revoked now, False when already revoked, None when not the principal's."""
        ...

    async def list_users(self, offset: int, limit: int) -> list[Principal]:
        """Users (not the local principal), oldest first."""
        ...

    async def set_disabled(self, principal_id: uuid.UUID, disabled: bool) -> bool:
        """Disables or re-enables a user; False when it already was so (or is no user)."""
        ...

    async def create_workspace_unique(
        self, owner_principal_id: uuid.UUID, slug: str, display_name: str
    ) -> uuid.UUID | None:
        """None when the slug is taken."""
        ...

    async def get_workspace(self, workspace_id: uuid.UUID) -> Workspace | None: ...

    async def add_workspace_member(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID, role: str = "member"
    ) -> None: ...

    async def remove_workspace_member(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID
    ) -> bool:
        """Removes the membership and any pending invitation; True when either existed."""
        ...

    async def invite_workspace_member(
        self, workspace_id: uuid.UUID, principal_id: uuid.UUID, role: str,
        inviter_principal_id: uuid.UUID,
    ) -> Invitation:
        """Creates the pending invitation, or renews the one the principal already has."""
        ...

    async def list_invitations(
        self, principal_id: uuid.UUID, offset: int, limit: int
    ) -> list[Invitation]: ...

    async def accept_invitation(
        self, principal_id: uuid.UUID, invitation_id: uuid.UUID
    ) -> tuple[Workspace, WorkspaceMember] | None:
        """Turns the principal's invitation into a membership; None when it has none."""
        ...

    async def decline_invitation(
        self, principal_id: uuid.UUID, invitation_id: uuid.UUID
    ) -> Invitation | None:
        """Deletes the principal's invitation; None when it has none."""
        ...

    async def list_workspace_members(
        self, workspace_id: uuid.UUID, offset: int, limit: int
    ) -> list[WorkspaceMember]: ...

    async def assign_project_workspace(
        self, project_id: uuid.UUID, workspace_id: uuid.UUID
    ) -> None: ...


def _digest(api_key: str) -> bytes:
    return hashlib.sha256(api_key.encode()).digest()


def _page_size(value: int) -> int:
    return page_size(value, default=DEFAULT_PAGE_SIZE, maximum=MAX_PAGE_SIZE)


def encode_offset(offset: int) -> str:
    return encode_position(offset, prefix="o")


def decode_offset(token: str) -> int:
    return decode_position(token, prefix="o")


def _vouched_email(email: str, issuer: str) -> VerifiedEmail | None:
    """The email and the issuer it is valid for: both or neither."""
    issuer = issuer.strip()
    if not email.strip() and not issuer:
        return None
    if not email.strip():
        raise InvalidInput("email")
    if not issuer or len(issuer) > MAX_EXTERNAL_CLAIM:
        raise InvalidInput("email_issuer")
    return VerifiedEmail(issuer, verified_email(email))


def _display_name(value: str, field: str = "display_name") -> str:
    """A name others read beside this principal's actions: hidden characters (bidi
    overrides, zero-width joiners, blank glyphs) would let it pass for another's."""
    name = value.strip()
    if not name or len(name) > MAX_DISPLAY_NAME:
        raise InvalidInput(field)
    hidden = first_hidden(name)
    if hidden is not None:
        raise InvalidInput(field, reason="hidden_character", codepoint=codepoint(hidden))
    return name


class AccountService:
    def __init__(self, store: AccountStore, identity: IdentityStore) -> None:
        self._store = store
        self._identity = identity

    # Principals -------------------------------------------------------------------------

    async def _principal(self, principal_id: str, field: str = "principal_id") -> Principal:
        pid = as_uuid(principal_id)
        principal = await self._identity.get_principal(pid) if pid else None
        if principal is None:
            raise InvalidInput(field, reason="not_found")
        return principal

    async def _admin(self, actor_principal_id: str) -> Principal:
        actor = await self._principal(actor_principal_id, "actor_principal_id")
        if not actor.admin:
            raise Unauthorized()
        return actor

    async def create_user(self, actor_principal_id: str, display_name: str, admin: bool,
                          email: str = "", email_issuer: str = "") -> Principal:
        name = _display_name(display_name)
        bootstrap = False
        if actor_principal_id.strip():
            await self._admin(actor_principal_id)
        elif email.strip() or email_issuer.strip():
            raise Unauthorized()  # only an administrator vouches for an email
        elif admin:
            bootstrap = True  # the first administrator; refused once one exists
        pid = uuid.uuid4()
        created = await self._store.create_user(
            pid, name, admin, personal_slugs(pid), only_if_no_admin=bootstrap,
            email=_vouched_email(email, email_issuer))
        if created is None:
            raise Unauthorized()
        await self._store.audit(actor_principal_id.strip() or str(pid), USER_CREATED,
                                {"principal_id": str(pid), "admin": str(admin).lower()})
        return created

    # API keys ---------------------------------------------------------------------------

    async def create_api_key(self, principal_id: str, label: str) -> tuple[ApiKey, str]:
        principal = await self._principal(principal_id)
        label = label.strip()
        if len(label) > MAX_LABEL:
            raise InvalidInput("label")
        key_id = secrets.token_hex(8)
        api_key = f"{API_KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        key = await self._store.insert_api_key(
            principal.principal_id, key_id, _digest(api_key), label)
        await self._store.audit(str(principal.principal_id), API_KEY_MINTED, {"key_id": key_id})
        return key, api_key

    async def authenticate_api_key(self, api_key: str) -> tuple[Principal, str]:
        """The key's principal and the key's id."""
        match = _API_KEY.match(api_key.strip())
        if match is None:
            self._store.count_auth_failure("malformed")
            raise Unauthenticated()
        record = await self._store.get_api_key(match.group(1))
        presented = _digest(api_key.strip())
        if record is None:
            # Same work either way, so timing does not tell a known key id from an unknown one.
            hmac.compare_digest(presented, bytes(32))
            self._store.count_auth_failure("unknown_key")
            raise Unauthenticated()
        if not hmac.compare_digest(presented, record.secret_sha256):
            self._store.count_auth_failure("wrong_secret")
            raise Unauthenticated()
        if record.key.revoked_at:
            self._store.count_auth_failure("key_revoked")
            raise Unauthenticated()
        principal = await self._identity.get_principal(record.principal_id)
        if principal is None or principal.disabled:
            raise Unauthenticated()
        return principal, record.key.key_id

    async def check_credential(self, principal_id: str, key_id: str
                               ) -> tuple[CredentialState, Principal]:
        """Whether ``key_id`` is an unrevoked key of the principal's. A key id that is
        unknown or another principal's reads as revoked: the token naming it stands on no
        key. An unknown principal is INVALID_INPUT (``not_found``)."""
        principal = await self._principal(principal_id)
        if principal.disabled:
            return CredentialState.PRINCIPAL_DISABLED, principal
        pid = principal.principal_id
        record = await self._store.get_api_key(key_id) if _KEY_ID.match(key_id) else None
        if record is None or record.principal_id != pid or record.key.revoked_at:
            return CredentialState.KEY_REVOKED, principal
        return CredentialState.ACTIVE, principal

    async def _owner_or_admin(self, principal_id: str, actor_principal_id: str) -> Principal:
        """The key owner, when the actor is the owner itself (or unnamed) or an administrator."""
        principal = await self._principal(principal_id)
        actor = actor_principal_id.strip()
        if actor and as_uuid(actor) != principal.principal_id:
            await self._admin(actor)
        return principal

    async def list_api_keys(self, principal_id: str, size: int, token: str,
                            actor_principal_id: str = "") -> tuple[list[ApiKey], str]:
        principal = await self._owner_or_admin(principal_id, actor_principal_id)
        limit, offset = _page_size(size), decode_offset(token)
        rows = await self._store.list_api_keys(principal.principal_id, offset, limit + 1)
        next_token = encode_offset(offset + limit) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def revoke_api_key(self, principal_id: str, key_id: str,
                             actor_principal_id: str = "") -> bool:
        principal = await self._owner_or_admin(principal_id, actor_principal_id)
        revoked = await self._store.revoke_api_key(principal.principal_id, key_id.strip())
        if revoked is None:
            raise NotFound()
        if revoked:
            await self._store.audit(
                str(principal.principal_id), API_KEY_REVOKED, {"key_id": key_id.strip()})
        return revoked

    # People leaving -----------------------------------------------------------------------

    async def list_users(self, actor_principal_id: str, size: int, token: str
                         ) -> tuple[list[Principal], str]:
        await self._admin(actor_principal_id)
        limit, offset = _page_size(size), decode_offset(token)
        rows = await self._store.list_users(offset, limit + 1)
        next_token = encode_offset(offset + limit) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def set_user_disabled(self, actor_principal_id: str, principal_id: str,
                                disabled: bool) -> tuple[Principal, bool]:
        """An administrator disables (or re-enables) a user; never itself, so a deployment
        cannot lock its last administrator out by mistake."""
        actor = await self._admin(actor_principal_id)
        principal = await self._principal(principal_id)
        if principal.principal_id == actor.principal_id:
            raise InvalidInput("principal_id", reason="self")
        changed = await self._store.set_disabled(principal.principal_id, disabled)
        if changed:
            await self._store.audit(str(actor.principal_id),
                                    USER_DISABLED if disabled else USER_ENABLED,
                                    {"principal_id": str(principal.principal_id)})
        return await self._principal(principal_id), changed

    # What the fronts report ---------------------------------------------------------------

    async def record_mcp_token_minted(self, principal_id: str, key_id: str) -> None:
        """The REST API minted an MCP token for the principal from ``key_id``."""
        principal = await self._principal(principal_id)
        key_id = key_id.strip()
        if key_id != LOCAL_KEY_ID and not _KEY_ID.match(key_id):
            raise InvalidInput("key_id")
        await self._store.audit(str(principal.principal_id), MCP_TOKEN_MINTED,
                                {"key_id": key_id})

    def record_refusals(self, source: str, window_seconds: int,
                        counts: Sequence[tuple[str, str, int]]) -> None:
        """Counts a front's refusals (action, reason, count) into this service's own
        interval, so that many fronts still make one record per reason and interval."""
        del window_seconds  # re-aggregated into this service's interval
        if source not in REFUSAL_SOURCES:
            raise InvalidInput("source")
        if len(counts) > MAX_REFUSAL_COUNTS:
            raise InvalidInput("counts", reason="too_many", maximum=MAX_REFUSAL_COUNTS)
        for action, reason, _ in counts:
            if action not in REFUSALS:
                raise InvalidInput("counts.action")
            if not _REASON.match(reason):
                raise InvalidInput("counts.reason")
        for action, reason, count in counts:
            if count > 0:
                self._store.count_refusals(action, reason, count, source)

    # Workspaces -------------------------------------------------------------------------

    async def create_workspace(self, actor_principal_id: str, slug: str, display_name: str,
                               owner_principal_id: str) -> Workspace:
        actor = await self._principal(actor_principal_id, "actor_principal_id")
        owner = actor
        if owner_principal_id.strip() and as_uuid(owner_principal_id) != actor.principal_id:
            if not actor.admin:
                raise Unauthorized()
            owner = await self._principal(owner_principal_id, "owner_principal_id")
        slug = slug.strip()
        if not SLUG.match(slug):
            raise InvalidInput("slug")
        name = display_name.strip() or slug
        if len(name) > MAX_DISPLAY_NAME:
            raise InvalidInput("display_name")
        workspace_id = await self._store.create_workspace_unique(owner.principal_id, slug, name)
        if workspace_id is None:
            raise InvalidInput("slug", reason="taken")
        return Workspace(workspace_id, slug, name, owner.principal_id)

    async def _managed_workspace(self, actor_principal_id: str, workspace_id: str,
                                 *, manage: bool) -> tuple[Principal, Workspace]:
        """The workspace, if the actor may see it (member or admin) and, with ``manage``,
        change it (owner or admin). Not visible behaves exactly like missing."""
        actor = await self._principal(actor_principal_id, "actor_principal_id")
        wid = as_uuid(workspace_id)
        workspace = await self._store.get_workspace(wid) if wid else None
        if workspace is None:
            raise NotFound()
        if actor.admin:
            return actor, workspace
        role = await self._identity.member_role(workspace.workspace_id, actor.principal_id)
        if role is None:
            raise NotFound()
        if manage and role is not WorkspaceRole.OWNER:
            raise Unauthorized()
        return actor, workspace

    async def set_workspace_member(self, actor_principal_id: str, workspace_id: str,
                                   principal_id: str, role: WorkspaceRole
                                   ) -> WorkspaceMember | Invitation:
        """The membership as stored, or the invitation an owner's add becomes."""
        actor, workspace = await self._managed_workspace(
            actor_principal_id, workspace_id, manage=True)
        member = await self._principal(principal_id)
        if (member.principal_id == workspace.owner_principal_id
                and role is not WorkspaceRole.OWNER):
            raise InvalidInput("role", reason="workspace_owner")
        if not actor.admin and await self._identity.member_role(
                workspace.workspace_id, member.principal_id) is None:
            return await self._store.invite_workspace_member(
                workspace.workspace_id, member.principal_id, role.value, actor.principal_id)
        await self._store.add_workspace_member(
            workspace.workspace_id, member.principal_id, role.value)
        await self._store.audit(str(actor.principal_id), MEMBER_SET, {
            "workspace_id": str(workspace.workspace_id),
            "principal_id": str(member.principal_id), "role": role.value})
        return WorkspaceMember(member.principal_id, role, member.display_name)

    async def list_invitations(self, actor_principal_id: str, size: int, token: str
                               ) -> tuple[list[Invitation], str]:
        actor = await self._principal(actor_principal_id, "actor_principal_id")
        limit, offset = _page_size(size), decode_offset(token)
        rows = await self._store.list_invitations(actor.principal_id, offset, limit + 1)
        next_token = encode_offset(offset + limit) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def accept_invitation(self, actor_principal_id: str, invitation_id: str
                                ) -> tuple[Workspace, WorkspaceMember]:
        actor = await self._principal(actor_principal_id, "actor_principal_id")
        iid = as_uuid(invitation_id)
        accepted = await self._store.accept_invitation(actor.principal_id, iid) if iid else None
        if accepted is None:
            raise NotFound()
        return accepted

    async def decline_invitation(self, actor_principal_id: str, invitation_id: str
                                 ) -> Invitation:
        actor = await self._principal(actor_principal_id, "actor_principal_id")
        iid = as_uuid(invitation_id)
        declined = await self._store.decline_invitation(actor.principal_id, iid) if iid else None
        if declined is None:
            raise NotFound()
        return declined

    async def remove_workspace_member(self, actor_principal_id: str, workspace_id: str,
                                      principal_id: str) -> bool:
        actor, workspace = await self._managed_workspace(
            actor_principal_id, workspace_id, manage=True)
        pid = parse_uuid("principal_id", principal_id)
        if pid == workspace.owner_principal_id:
            raise InvalidInput("principal_id", reason="workspace_owner")
        removed = await self._store.remove_workspace_member(workspace.workspace_id, pid)
        if removed:
            await self._store.audit(str(actor.principal_id), MEMBER_REMOVED, {
                "workspace_id": str(workspace.workspace_id), "principal_id": str(pid)})
        return removed

    async def list_workspace_members(self, actor_principal_id: str, workspace_id: str,
                                     size: int, token: str
                                     ) -> tuple[list[WorkspaceMember], str]:
        _, workspace = await self._managed_workspace(
            actor_principal_id, workspace_id, manage=False)
        limit, offset = _page_size(size), decode_offset(token)
        rows = await self._store.list_workspace_members(
            workspace.workspace_id, offset, limit + 1)
        next_token = encode_offset(offset + limit) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def attach_project(self, actor_principal_id: str, workspace_id: str,
                             project: str) -> tuple[Project, bool]:
        """The project attached to the workspace, and True when this call created it."""
        actor, workspace = await self._managed_workspace(
            actor_principal_id, workspace_id, manage=True)
        reference = project.strip()
        project_uuid = as_uuid(reference)
        found = (await self._identity.get_project(project_uuid) if project_uuid
                 else await self._identity.get_project_by_slug(reference))
        created = False
        if found is None and project_uuid is None:
            found, created = await self._identity.create_shared_project(
                actor.principal_id, new_project_slug(reference), reference)
        if found is None or (not actor.admin and found.owner_principal_id != actor.principal_id):
            raise ProjectOutOfScope()
        if found.kind is not ProjectKind.SHARED or found.slug.startswith(PERSONAL_SLUG_PREFIX):
            raise InvalidInput("project", reason="personal_scope")
        await self._store.assign_project_workspace(found.project_id, workspace.workspace_id)
        return Project(found.project_id, found.slug, found.display_name, found.kind,
                       found.owner_principal_id, workspace.workspace_id), created
