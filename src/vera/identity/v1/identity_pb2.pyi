from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
PROJECT_KIND_UNSPECIFIED: ProjectKind
PROJECT_KIND_PERSONAL: ProjectKind
PROJECT_KIND_SHARED: ProjectKind
REPOSITORY_RESOLUTION_UNSPECIFIED: RepositoryResolution
REPOSITORY_RESOLUTION_SELECTED: RepositoryResolution
REPOSITORY_RESOLUTION_SELECTION_REQUIRED: RepositoryResolution
REPOSITORY_RESOLUTION_UNMAPPED: RepositoryResolution
REPOSITORY_RESOLUTION_UNSUPPORTED_REPOSITORY: RepositoryResolution
REPOSITORY_RESOLUTION_PERSONAL_ONLY: RepositoryResolution

class Principal(_message.Message):
    __slots__ = ("principal_id", "display_name", "personal_scope_id")
    PRINCIPAL_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    PERSONAL_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    principal_id: str
    display_name: str
    personal_scope_id: str
    def __init__(self, principal_id: _Optional[str] = ..., display_name: _Optional[str] = ..., personal_scope_id: _Optional[str] = ...) -> None: ...

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
