import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CredentialState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CREDENTIAL_STATE_UNSPECIFIED: _ClassVar[CredentialState]
    CREDENTIAL_STATE_ACTIVE: _ClassVar[CredentialState]
    CREDENTIAL_STATE_KEY_REVOKED: _ClassVar[CredentialState]
    CREDENTIAL_STATE_PRINCIPAL_DISABLED: _ClassVar[CredentialState]

class ProjectKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROJECT_KIND_UNSPECIFIED: _ClassVar[ProjectKind]
    PROJECT_KIND_PERSONAL: _ClassVar[ProjectKind]
    PROJECT_KIND_SHARED: _ClassVar[ProjectKind]

class RepositoryResolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPOSITORY_RESOLUTION_UNSPECIFIED: _ClassVar[RepositoryResolution]
    REPOSITORY_RESOLUTION_SELECTED: _ClassVar[RepositoryResolution]
    REPOSITORY_RESOLUTION_SELECTION_REQUIRED: _ClassVar[RepositoryResolution]
    REPOSITORY_RESOLUTION_UNMAPPED: _ClassVar[RepositoryResolution]
    REPOSITORY_RESOLUTION_UNSUPPORTED_REPOSITORY: _ClassVar[RepositoryResolution]
    REPOSITORY_RESOLUTION_PERSONAL_ONLY: _ClassVar[RepositoryResolution]

class WorkspaceRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKSPACE_ROLE_UNSPECIFIED: _ClassVar[WorkspaceRole]
    WORKSPACE_ROLE_OWNER: _ClassVar[WorkspaceRole]
    WORKSPACE_ROLE_CURATOR: _ClassVar[WorkspaceRole]
    WORKSPACE_ROLE_MEMBER: _ClassVar[WorkspaceRole]
CREDENTIAL_STATE_UNSPECIFIED: CredentialState
CREDENTIAL_STATE_ACTIVE: CredentialState
CREDENTIAL_STATE_KEY_REVOKED: CredentialState
CREDENTIAL_STATE_PRINCIPAL_DISABLED: CredentialState
PROJECT_KIND_UNSPECIFIED: ProjectKind
PROJECT_KIND_PERSONAL: ProjectKind
PROJECT_KIND_SHARED: ProjectKind
REPOSITORY_RESOLUTION_UNSPECIFIED: RepositoryResolution
REPOSITORY_RESOLUTION_SELECTED: RepositoryResolution
REPOSITORY_RESOLUTION_SELECTION_REQUIRED: RepositoryResolution
REPOSITORY_RESOLUTION_UNMAPPED: RepositoryResolution
REPOSITORY_RESOLUTION_UNSUPPORTED_REPOSITORY: RepositoryResolution
REPOSITORY_RESOLUTION_PERSONAL_ONLY: RepositoryResolution
WORKSPACE_ROLE_UNSPECIFIED: WorkspaceRole
WORKSPACE_ROLE_OWNER: WorkspaceRole
WORKSPACE_ROLE_CURATOR: WorkspaceRole
WORKSPACE_ROLE_MEMBER: WorkspaceRole

class Principal(_message.Message):
    __slots__ = ("principal_id", "display_name", "personal_scope_id", "admin", "disabled")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    display_name: str
    personal_scope_id: str
    admin: bool
    disabled: bool
    def __init__(self, principal_id: _Optional[str] = ..., display_name: _Optional[str] = ..., personal_scope_id: _Optional[str] = ..., admin: _Optional[bool] = ..., disabled: _Optional[bool] = ...) -> None: ...

class Project(_message.Message):
    __slots__ = ("project_id", "slug", "display_name", "kind", "owner_principal_id", "workspace_id")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    slug: str
    display_name: str
    kind: ProjectKind
    owner_principal_id: str
    workspace_id: str
    def __init__(self, project_id: _Optional[str] = ..., slug: _Optional[str] = ..., display_name: _Optional[str] = ..., kind: _Optional[_Union[ProjectKind, str]] = ..., owner_principal_id: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class EnsureLocalPrincipalRequest(_message.Message):
    __slots__ = ("principal_id",)
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    def __init__(self, principal_id: _Optional[str] = ...) -> None: ...

class EnsureLocalPrincipalResponse(_message.Message):
    __slots__ = ("principal", "created")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    created: bool
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetPrincipalRequest(_message.Message):
    __slots__ = ("principal_id",)
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    def __init__(self, principal_id: _Optional[str] = ...) -> None: ...

class GetPrincipalResponse(_message.Message):
    __slots__ = ("principal",)
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ...) -> None: ...

class ResolveScopesRequest(_message.Message):
    __slots__ = ("principal_id",)
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    def __init__(self, principal_id: _Optional[str] = ...) -> None: ...

class ResolveScopesResponse(_message.Message):
    __slots__ = ("personal_scope_id", "projects")
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECTS_FIELD_NUMBER: _ClassVar[int]
    personal_scope_id: str
    projects: _containers.RepeatedCompositeFieldContainer[Project]
    def __init__(self, personal_scope_id: _Optional[str] = ..., projects: _Optional[_Iterable[_Union[Project, _Mapping]]] = ...) -> None: ...

class ResolveProjectRequest(_message.Message):
    __slots__ = ("principal_id", "project")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    project: str
    def __init__(self, principal_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class ResolveProjectResponse(_message.Message):
    __slots__ = ("project",)
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    project: Project
    def __init__(self, project: _Optional[_Union[Project, _Mapping]] = ...) -> None: ...

class EnsureProjectRequest(_message.Message):
    __slots__ = ("principal_id", "slug", "display_name")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    slug: str
    display_name: str
    def __init__(self, principal_id: _Optional[str] = ..., slug: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class EnsureProjectResponse(_message.Message):
    __slots__ = ("project", "created")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    project: Project
    created: bool
    def __init__(self, project: _Optional[_Union[Project, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class MapRepositoryRequest(_message.Message):
    __slots__ = ("principal_id", "project_id", "repository")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    project_id: str
    repository: str
    def __init__(self, principal_id: _Optional[str] = ..., project_id: _Optional[str] = ..., repository: _Optional[str] = ...) -> None: ...

class MapRepositoryResponse(_message.Message):
    __slots__ = ("canonical_repository", "created")
    CANONICAL_REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    canonical_repository: str
    created: bool
    def __init__(self, canonical_repository: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class AuthorizeCuratorRequest(_message.Message):
    __slots__ = ("principal_id", "project")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    project: str
    def __init__(self, principal_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class AuthorizeCuratorResponse(_message.Message):
    __slots__ = ("project",)
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    project: Project
    def __init__(self, project: _Optional[_Union[Project, _Mapping]] = ...) -> None: ...

class ResolveRepositoryRequest(_message.Message):
    __slots__ = ("principal_id", "repository")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    repository: str
    def __init__(self, principal_id: _Optional[str] = ..., repository: _Optional[str] = ...) -> None: ...

class ResolveRepositoryResponse(_message.Message):
    __slots__ = ("resolution", "canonical_repository", "candidates")
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    resolution: RepositoryResolution
    canonical_repository: str
    candidates: _containers.RepeatedCompositeFieldContainer[Project]
    def __init__(self, resolution: _Optional[_Union[RepositoryResolution, str]] = ..., canonical_repository: _Optional[str] = ..., candidates: _Optional[_Iterable[_Union[Project, _Mapping]]] = ...) -> None: ...

class Workspace(_message.Message):
    __slots__ = ("workspace_id", "slug", "display_name", "owner_principal_id")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    slug: str
    display_name: str
    owner_principal_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., slug: _Optional[str] = ..., display_name: _Optional[str] = ..., owner_principal_id: _Optional[str] = ...) -> None: ...

class WorkspaceMember(_message.Message):
    __slots__ = ("principal_id", "role", "display_name")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    role: WorkspaceRole
    display_name: str
    def __init__(self, principal_id: _Optional[str] = ..., role: _Optional[_Union[WorkspaceRole, str]] = ..., display_name: _Optional[str] = ...) -> None: ...

class ApiKey(_message.Message):
    __slots__ = ("key_id", "label", "create_time", "revoke_time")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    label: str
    create_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    def __init__(self, key_id: _Optional[str] = ..., label: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateUserRequest(_message.Message):
    __slots__ = ("actor_principal_id", "display_name", "admin", "email", "email_issuer")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_ISSUER_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    display_name: str
    admin: bool
    email: str
    email_issuer: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., display_name: _Optional[str] = ..., admin: _Optional[bool] = ..., email: _Optional[str] = ..., email_issuer: _Optional[str] = ...) -> None: ...

class CreateUserResponse(_message.Message):
    __slots__ = ("principal",)
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("principal_id", "label")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    label: str
    def __init__(self, principal_id: _Optional[str] = ..., label: _Optional[str] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("key", "api_key")
    KEY_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    api_key: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., api_key: _Optional[str] = ...) -> None: ...

class AuthenticateApiKeyRequest(_message.Message):
    __slots__ = ("api_key",)
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    api_key: str
    def __init__(self, api_key: _Optional[str] = ...) -> None: ...

class AuthenticateApiKeyResponse(_message.Message):
    __slots__ = ("principal", "key_id")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    key_id: str
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ..., key_id: _Optional[str] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("principal_id", "page_size", "page_token", "actor_principal_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    page_size: int
    page_token: str
    actor_principal_id: str
    def __init__(self, principal_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., actor_principal_id: _Optional[str] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("keys", "next_page_token")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    next_page_token: str
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("principal_id", "key_id", "actor_principal_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    key_id: str
    actor_principal_id: str
    def __init__(self, principal_id: _Optional[str] = ..., key_id: _Optional[str] = ..., actor_principal_id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: bool
    def __init__(self, revoked: _Optional[bool] = ...) -> None: ...

class CreateWorkspaceRequest(_message.Message):
    __slots__ = ("actor_principal_id", "slug", "display_name", "owner_principal_id")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    slug: str
    display_name: str
    owner_principal_id: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., slug: _Optional[str] = ..., display_name: _Optional[str] = ..., owner_principal_id: _Optional[str] = ...) -> None: ...

class CreateWorkspaceResponse(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: Workspace
    def __init__(self, workspace: _Optional[_Union[Workspace, _Mapping]] = ...) -> None: ...

class SetWorkspaceMemberRequest(_message.Message):
    __slots__ = ("actor_principal_id", "workspace_id", "principal_id", "role")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    workspace_id: str
    principal_id: str
    role: WorkspaceRole
    def __init__(self, actor_principal_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., principal_id: _Optional[str] = ..., role: _Optional[_Union[WorkspaceRole, str]] = ...) -> None: ...

class SetWorkspaceMemberResponse(_message.Message):
    __slots__ = ("member", "invitation")
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    INVITATION_FIELD_NUMBER: _ClassVar[int]
    member: WorkspaceMember
    invitation: Invitation
    def __init__(self, member: _Optional[_Union[WorkspaceMember, _Mapping]] = ..., invitation: _Optional[_Union[Invitation, _Mapping]] = ...) -> None: ...

class RemoveWorkspaceMemberRequest(_message.Message):
    __slots__ = ("actor_principal_id", "workspace_id", "principal_id")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    workspace_id: str
    principal_id: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., principal_id: _Optional[str] = ...) -> None: ...

class RemoveWorkspaceMemberResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class Invitation(_message.Message):
    __slots__ = ("invitation_id", "workspace", "principal_id", "role", "inviter_principal_id", "create_time")
    INVITATION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    INVITER_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    invitation_id: str
    workspace: Workspace
    principal_id: str
    role: WorkspaceRole
    inviter_principal_id: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, invitation_id: _Optional[str] = ..., workspace: _Optional[_Union[Workspace, _Mapping]] = ..., principal_id: _Optional[str] = ..., role: _Optional[_Union[WorkspaceRole, str]] = ..., inviter_principal_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListInvitationsRequest(_message.Message):
    __slots__ = ("actor_principal_id", "page_size", "page_token")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    page_size: int
    page_token: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListInvitationsResponse(_message.Message):
    __slots__ = ("invitations", "next_page_token")
    INVITATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    invitations: _containers.RepeatedCompositeFieldContainer[Invitation]
    next_page_token: str
    def __init__(self, invitations: _Optional[_Iterable[_Union[Invitation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AcceptInvitationRequest(_message.Message):
    __slots__ = ("actor_principal_id", "invitation_id")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    INVITATION_ID_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    invitation_id: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., invitation_id: _Optional[str] = ...) -> None: ...

class AcceptInvitationResponse(_message.Message):
    __slots__ = ("workspace", "member")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    workspace: Workspace
    member: WorkspaceMember
    def __init__(self, workspace: _Optional[_Union[Workspace, _Mapping]] = ..., member: _Optional[_Union[WorkspaceMember, _Mapping]] = ...) -> None: ...

class DeclineInvitationRequest(_message.Message):
    __slots__ = ("actor_principal_id", "invitation_id")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    INVITATION_ID_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    invitation_id: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., invitation_id: _Optional[str] = ...) -> None: ...

class DeclineInvitationResponse(_message.Message):
    __slots__ = ("invitation",)
    INVITATION_FIELD_NUMBER: _ClassVar[int]
    invitation: Invitation
    def __init__(self, invitation: _Optional[_Union[Invitation, _Mapping]] = ...) -> None: ...

class ListWorkspaceMembersRequest(_message.Message):
    __slots__ = ("actor_principal_id", "workspace_id", "page_size", "page_token")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    workspace_id: str
    page_size: int
    page_token: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkspaceMembersResponse(_message.Message):
    __slots__ = ("members", "next_page_token")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[WorkspaceMember]
    next_page_token: str
    def __init__(self, members: _Optional[_Iterable[_Union[WorkspaceMember, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AttachProjectRequest(_message.Message):
    __slots__ = ("actor_principal_id", "workspace_id", "project")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    workspace_id: str
    project: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class AttachProjectResponse(_message.Message):
    __slots__ = ("project", "created")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    project: Project
    created: bool
    def __init__(self, project: _Optional[_Union[Project, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class EnsureExternalPrincipalRequest(_message.Message):
    __slots__ = ("issuer", "subject", "email", "email_verified")
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    EMAIL_VERIFIED_FIELD_NUMBER: _ClassVar[int]
    issuer: str
    subject: str
    email: str
    email_verified: bool
    def __init__(self, issuer: _Optional[str] = ..., subject: _Optional[str] = ..., email: _Optional[str] = ..., email_verified: _Optional[bool] = ...) -> None: ...

class EnsureExternalPrincipalResponse(_message.Message):
    __slots__ = ("principal", "created")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    created: bool
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class ChargeQuotaRequest(_message.Message):
    __slots__ = ("key", "window_start", "limit")
    KEY_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    window_start: int
    limit: int
    def __init__(self, key: _Optional[str] = ..., window_start: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ChargeQuotaResponse(_message.Message):
    __slots__ = ("allowed",)
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    def __init__(self, allowed: _Optional[bool] = ...) -> None: ...

class ListAuditRecordsRequest(_message.Message):
    __slots__ = ("after_seq", "page_size", "action")
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    page_size: int
    action: str
    def __init__(self, after_seq: _Optional[int] = ..., page_size: _Optional[int] = ..., action: _Optional[str] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("seq", "recorded_at", "actor", "action", "targets", "hash")
    class TargetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    seq: int
    recorded_at: _timestamp_pb2.Timestamp
    actor: str
    action: str
    targets: _containers.ScalarMap[str, str]
    hash: str
    def __init__(self, seq: _Optional[int] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., targets: _Optional[_Mapping[str, str]] = ..., hash: _Optional[str] = ...) -> None: ...

class ListAuditRecordsResponse(_message.Message):
    __slots__ = ("records", "head_seq", "head_hash")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEAD_HASH_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AuditRecord]
    head_seq: int
    head_hash: str
    def __init__(self, records: _Optional[_Iterable[_Union[AuditRecord, _Mapping]]] = ..., head_seq: _Optional[int] = ..., head_hash: _Optional[str] = ...) -> None: ...

class CheckCredentialRequest(_message.Message):
    __slots__ = ("principal_id", "key_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    key_id: str
    def __init__(self, principal_id: _Optional[str] = ..., key_id: _Optional[str] = ...) -> None: ...

class CheckCredentialResponse(_message.Message):
    __slots__ = ("state", "principal")
    STATE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    state: CredentialState
    principal: Principal
    def __init__(self, state: _Optional[_Union[CredentialState, str]] = ..., principal: _Optional[_Union[Principal, _Mapping]] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ("actor_principal_id", "page_size", "page_token")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    page_size: int
    page_token: str
    def __init__(self, actor_principal_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users", "next_page_token")
    USERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[Principal]
    next_page_token: str
    def __init__(self, users: _Optional[_Iterable[_Union[Principal, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetUserDisabledRequest(_message.Message):
    __slots__ = ("actor_principal_id", "principal_id", "disabled")
    ACTOR_PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    actor_principal_id: str
    principal_id: str
    disabled: bool
    def __init__(self, actor_principal_id: _Optional[str] = ..., principal_id: _Optional[str] = ..., disabled: _Optional[bool] = ...) -> None: ...

class SetUserDisabledResponse(_message.Message):
    __slots__ = ("principal", "changed")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    principal: Principal
    changed: bool
    def __init__(self, principal: _Optional[_Union[Principal, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class RecordMcpTokenMintedRequest(_message.Message):
    __slots__ = ("principal_id", "key_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    key_id: str
    def __init__(self, principal_id: _Optional[str] = ..., key_id: _Optional[str] = ...) -> None: ...

class RecordMcpTokenMintedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RefusalCount(_message.Message):
    __slots__ = ("action", "reason", "count")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    action: str
    reason: str
    count: int
    def __init__(self, action: _Optional[str] = ..., reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class RecordRefusalsRequest(_message.Message):
    __slots__ = ("source", "window_seconds", "counts")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    source: str
    window_seconds: int
    counts: _containers.RepeatedCompositeFieldContainer[RefusalCount]
    def __init__(self, source: _Optional[str] = ..., window_seconds: _Optional[int] = ..., counts: _Optional[_Iterable[_Union[RefusalCount, _Mapping]]] = ...) -> None: ...

class RecordRefusalsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
