"""Proto <-> domain conversions of IdentityService: every message its servicer sends or
reads is built here; the servicer builds only its responses, from these."""

from __future__ import annotations

from vera.identity.v1 import identity_pb2 as pb
from vera.rpc.timestamps import to_timestamp
from vera.services.identity.accounts import (
    ApiKey,
    CredentialState,
    Invitation,
    Workspace,
    WorkspaceMember,
)
from vera.services.identity.domain import (
    Principal,
    Project,
    ProjectKind,
    Resolution,
    WorkspaceRole,
)

_KINDS = {
    ProjectKind.PERSONAL: pb.PROJECT_KIND_PERSONAL,
    ProjectKind.SHARED: pb.PROJECT_KIND_SHARED,
}
RESOLUTIONS = {
    Resolution.SELECTED: pb.REPOSITORY_RESOLUTION_SELECTED,
    Resolution.SELECTION_REQUIRED: pb.REPOSITORY_RESOLUTION_SELECTION_REQUIRED,
    Resolution.UNMAPPED: pb.REPOSITORY_RESOLUTION_UNMAPPED,
    Resolution.UNSUPPORTED_REPOSITORY: pb.REPOSITORY_RESOLUTION_UNSUPPORTED_REPOSITORY,
    Resolution.PERSONAL_ONLY: pb.REPOSITORY_RESOLUTION_PERSONAL_ONLY,
}


def principal_to_proto(principal: Principal) -> pb.Principal:
    return pb.Principal(
        principal_id=str(principal.principal_id),
        display_name=principal.display_name,
        personal_scope_id=str(principal.personal_scope_id),
        admin=principal.admin,
        disabled=principal.disabled,
    )


def project_to_proto(project: Project) -> pb.Project:
    return pb.Project(
        project_id=str(project.project_id),
        slug=project.slug,
        display_name=project.display_name,
        kind=_KINDS[project.kind],
        owner_principal_id=str(project.owner_principal_id),
        workspace_id=str(project.workspace_id) if project.workspace_id else "",
    )


CREDENTIAL_STATES = {
    CredentialState.ACTIVE: pb.CREDENTIAL_STATE_ACTIVE,
    CredentialState.KEY_REVOKED: pb.CREDENTIAL_STATE_KEY_REVOKED,
    CredentialState.PRINCIPAL_DISABLED: pb.CREDENTIAL_STATE_PRINCIPAL_DISABLED,
}


_ROLES = {
    WorkspaceRole.OWNER: pb.WORKSPACE_ROLE_OWNER,
    WorkspaceRole.CURATOR: pb.WORKSPACE_ROLE_CURATOR,
    WorkspaceRole.MEMBER: pb.WORKSPACE_ROLE_MEMBER,
}
ROLES_FROM_PROTO = {v: k for k, v in _ROLES.items()}


def api_key_to_proto(key: ApiKey) -> pb.ApiKey:
    out = pb.ApiKey(key_id=key.key_id, label=key.label)
    out.create_time.CopyFrom(to_timestamp(key.created_at))
    if key.revoked_at is not None:
        out.revoke_time.CopyFrom(to_timestamp(key.revoked_at))
    return out


def workspace_to_proto(workspace: Workspace) -> pb.Workspace:
    return pb.Workspace(
        workspace_id=str(workspace.workspace_id),
        slug=workspace.slug,
        display_name=workspace.display_name,
        owner_principal_id=str(workspace.owner_principal_id),
    )


def member_to_proto(member: WorkspaceMember) -> pb.WorkspaceMember:
    return pb.WorkspaceMember(
        principal_id=str(member.principal_id),
        role=_ROLES[member.role],
        display_name=member.display_name,
    )


def invitation_to_proto(invitation: Invitation) -> pb.Invitation:
    out = pb.Invitation(
        invitation_id=str(invitation.invitation_id),
        workspace=workspace_to_proto(invitation.workspace),
        principal_id=str(invitation.principal_id),
        role=_ROLES[invitation.role],
        inviter_principal_id=str(invitation.inviter_principal_id),
    )
    out.create_time.CopyFrom(to_timestamp(invitation.created_at))
    return out
