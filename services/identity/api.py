"""The IdentityService servicer: proto <-> domain, nothing else."""

from __future__ import annotations

from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.services.identity.domain import (
    IdentityService,
    Principal,
    Project,
    ProjectKind,
    Resolution,
)

_KINDS = {
    ProjectKind.PERSONAL: pb.PROJECT_KIND_PERSONAL,
    ProjectKind.SHARED: pb.PROJECT_KIND_SHARED,
}
_RESOLUTIONS = {
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


class IdentityApi(identity_pb2_grpc.IdentityServiceServicer):
    def __init__(self, service: IdentityService) -> None:
        self._service = service

    async def EnsureLocalPrincipal(self, request, context):
        principal, created = await self._service.ensure_local_principal(request.principal_id)
        return pb.EnsureLocalPrincipalResponse(
            principal=principal_to_proto(principal), created=created
        )

    async def GetPrincipal(self, request, context):
        principal = await self._service.get_principal(request.principal_id)
        return pb.GetPrincipalResponse(principal=principal_to_proto(principal))

    async def ResolveScopes(self, request, context):
        scopes = await self._service.resolve_scopes(request.principal_id)
        return pb.ResolveScopesResponse(
            personal_scope_id=str(scopes.personal_scope_id),
            projects=[project_to_proto(p) for p in scopes.projects],
        )

    async def ResolveProject(self, request, context):
        project = await self._service.resolve_project(request.principal_id, request.project)
        return pb.ResolveProjectResponse(project=project_to_proto(project))

    async def EnsureProject(self, request, context):
        project, created = await self._service.ensure_project(
            request.principal_id, request.slug, request.display_name
        )
        return pb.EnsureProjectResponse(project=project_to_proto(project), created=created)

    async def MapRepository(self, request, context):
        canonical, created = await self._service.map_repository(
            request.principal_id, request.project_id, request.repository
        )
        return pb.MapRepositoryResponse(canonical_repository=canonical, created=created)

    async def ResolveRepository(self, request, context):
        result = await self._service.resolve_repository(request.principal_id, request.repository)
        return pb.ResolveRepositoryResponse(
            resolution=_RESOLUTIONS[result.resolution],
            canonical_repository=result.canonical_repository,
            candidates=[project_to_proto(p) for p in result.candidates],
        )
