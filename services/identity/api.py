"""The IdentityService servicer: proto <-> domain, nothing else."""

from __future__ import annotations

from vera.errors import InvalidInput, Unauthorized
from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.audit import AuditPages, list_audit_records
from vera.services.identity.accounts import AccountService, CredentialState, Invitation
from vera.services.identity.convert import (
    CREDENTIAL_STATES,
    RESOLUTIONS,
    ROLES_FROM_PROTO,
    api_key_to_proto,
    invitation_to_proto,
    member_to_proto,
    principal_to_proto,
    project_to_proto,
    workspace_to_proto,
)
from vera.services.identity.domain import IdentityService


class IdentityApi(identity_pb2_grpc.IdentityServiceServicer):
    def __init__(
        self,
        service: IdentityService,
        accounts: AccountService,
        *,
        local_dev: bool = False,
        audit: AuditPages | None = None,
    ) -> None:
        self._service = service
        self._accounts = accounts
        self._local_dev = local_dev
        self._audit = audit

    async def ListAuditRecords(
        self, request: pb.ListAuditRecordsRequest, context
    ) -> pb.ListAuditRecordsResponse:
        return await list_audit_records(self._audit, request, pb)

    async def EnsureLocalPrincipal(
        self, request: pb.EnsureLocalPrincipalRequest, context
    ) -> pb.EnsureLocalPrincipalResponse:
        # The local principal reads as an administrator: only a local-dev identity
        # service hands it out.
        if not self._local_dev:
            raise Unauthorized("the local principal exists only in the local-dev profile")
        principal, created = await self._service.ensure_local_principal(request.principal_id)
        return pb.EnsureLocalPrincipalResponse(
            principal=principal_to_proto(principal), created=created
        )

    async def GetPrincipal(
        self, request: pb.GetPrincipalRequest, context
    ) -> pb.GetPrincipalResponse:
        principal = await self._service.get_principal(request.principal_id)
        return pb.GetPrincipalResponse(principal=principal_to_proto(principal))

    async def ResolveScopes(
        self, request: pb.ResolveScopesRequest, context
    ) -> pb.ResolveScopesResponse:
        scopes = await self._service.resolve_scopes(request.principal_id)
        return pb.ResolveScopesResponse(
            personal_scope_id=str(scopes.personal_scope_id),
            projects=[project_to_proto(p) for p in scopes.projects],
        )

    async def ResolveProject(
        self, request: pb.ResolveProjectRequest, context
    ) -> pb.ResolveProjectResponse:
        project = await self._service.resolve_project(request.principal_id, request.project)
        return pb.ResolveProjectResponse(project=project_to_proto(project))

    async def EnsureProject(
        self, request: pb.EnsureProjectRequest, context
    ) -> pb.EnsureProjectResponse:
        project, created = await self._service.ensure_project(
            request.principal_id, request.slug, request.display_name
        )
        return pb.EnsureProjectResponse(project=project_to_proto(project), created=created)

    async def MapRepository(
        self, request: pb.MapRepositoryRequest, context
    ) -> pb.MapRepositoryResponse:
        canonical, created = await self._service.map_repository(
            request.principal_id, request.project_id, request.repository
        )
        return pb.MapRepositoryResponse(canonical_repository=canonical, created=created)

    async def AuthorizeCurator(
        self, request: pb.AuthorizeCuratorRequest, context
    ) -> pb.AuthorizeCuratorResponse:
        project = await self._service.authorize_curator(request.principal_id, request.project)
        return pb.AuthorizeCuratorResponse(project=project_to_proto(project))

    async def EnsureExternalPrincipal(
        self, request: pb.EnsureExternalPrincipalRequest, context
    ) -> pb.EnsureExternalPrincipalResponse:
        principal, created = await self._service.ensure_external_principal(
            request.issuer, request.subject, request.email, request.email_verified
        )
        return pb.EnsureExternalPrincipalResponse(
            principal=principal_to_proto(principal), created=created
        )

    async def ChargeQuota(
        self, request: pb.ChargeQuotaRequest, context
    ) -> pb.ChargeQuotaResponse:
        allowed = await self._service.charge_quota(
            request.key, request.window_start, request.limit
        )
        return pb.ChargeQuotaResponse(allowed=allowed)

    async def ResolveRepository(
        self, request: pb.ResolveRepositoryRequest, context
    ) -> pb.ResolveRepositoryResponse:
        result = await self._service.resolve_repository(request.principal_id, request.repository)
        return pb.ResolveRepositoryResponse(
            resolution=RESOLUTIONS[result.resolution],
            canonical_repository=result.canonical_repository,
            candidates=[project_to_proto(p) for p in result.candidates],
        )

    # Accounts: users, API keys, workspaces (services/identity/accounts.py) ----------------

    async def CreateUser(
        self, request: pb.CreateUserRequest, context
    ) -> pb.CreateUserResponse:
        principal = await self._accounts.create_user(
            request.actor_principal_id,
            request.display_name,
            request.admin,
            request.email,
            request.email_issuer,
        )
        return pb.CreateUserResponse(principal=principal_to_proto(principal))

    async def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context
    ) -> pb.CreateApiKeyResponse:
        key, secret = await self._accounts.create_api_key(request.principal_id, request.label)
        return pb.CreateApiKeyResponse(key=api_key_to_proto(key), api_key=secret)

    async def AuthenticateApiKey(
        self, request: pb.AuthenticateApiKeyRequest, context
    ) -> pb.AuthenticateApiKeyResponse:
        principal, key_id = await self._accounts.authenticate_api_key(request.api_key)
        return pb.AuthenticateApiKeyResponse(
            principal=principal_to_proto(principal), key_id=key_id
        )

    async def ListUsers(
        self, request: pb.ListUsersRequest, context
    ) -> pb.ListUsersResponse:
        users, token = await self._accounts.list_users(
            request.actor_principal_id, request.page_size, request.page_token
        )
        return pb.ListUsersResponse(
            users=[principal_to_proto(u) for u in users], next_page_token=token
        )

    async def SetUserDisabled(
        self, request: pb.SetUserDisabledRequest, context
    ) -> pb.SetUserDisabledResponse:
        principal, changed = await self._accounts.set_user_disabled(
            request.actor_principal_id, request.principal_id, request.disabled
        )
        return pb.SetUserDisabledResponse(
            principal=principal_to_proto(principal), changed=changed
        )

    async def RecordMcpTokenMinted(
        self, request: pb.RecordMcpTokenMintedRequest, context
    ) -> pb.RecordMcpTokenMintedResponse:
        await self._accounts.record_mcp_token_minted(request.principal_id, request.key_id)
        return pb.RecordMcpTokenMintedResponse()

    async def RecordRefusals(
        self, request: pb.RecordRefusalsRequest, context
    ) -> pb.RecordRefusalsResponse:
        self._accounts.record_refusals(
            request.source, request.window_seconds,
            [(c.action, c.reason, c.count) for c in request.counts])
        return pb.RecordRefusalsResponse()

    async def CheckCredential(
        self, request: pb.CheckCredentialRequest, context
    ) -> pb.CheckCredentialResponse:
        state, principal = await self._accounts.check_credential(
            request.principal_id, request.key_id
        )
        active = state is CredentialState.ACTIVE
        return pb.CheckCredentialResponse(
            state=CREDENTIAL_STATES[state],
            principal=principal_to_proto(principal) if active else None,
        )

    async def ListApiKeys(
        self, request: pb.ListApiKeysRequest, context
    ) -> pb.ListApiKeysResponse:
        keys, token = await self._accounts.list_api_keys(
            request.principal_id, request.page_size, request.page_token,
            request.actor_principal_id,
        )
        return pb.ListApiKeysResponse(
            keys=[api_key_to_proto(k) for k in keys], next_page_token=token
        )

    async def RevokeApiKey(
        self, request: pb.RevokeApiKeyRequest, context
    ) -> pb.RevokeApiKeyResponse:
        revoked = await self._accounts.revoke_api_key(
            request.principal_id, request.key_id, request.actor_principal_id
        )
        return pb.RevokeApiKeyResponse(revoked=revoked)

    async def CreateWorkspace(
        self, request: pb.CreateWorkspaceRequest, context
    ) -> pb.CreateWorkspaceResponse:
        workspace = await self._accounts.create_workspace(
            request.actor_principal_id,
            request.slug,
            request.display_name,
            request.owner_principal_id,
        )
        return pb.CreateWorkspaceResponse(workspace=workspace_to_proto(workspace))

    async def SetWorkspaceMember(
        self, request: pb.SetWorkspaceMemberRequest, context
    ) -> pb.SetWorkspaceMemberResponse:
        role = ROLES_FROM_PROTO.get(request.role)
        if role is None:
            raise InvalidInput("role")
        stored = await self._accounts.set_workspace_member(
            request.actor_principal_id, request.workspace_id, request.principal_id, role
        )
        if isinstance(stored, Invitation):
            return pb.SetWorkspaceMemberResponse(invitation=invitation_to_proto(stored))
        return pb.SetWorkspaceMemberResponse(member=member_to_proto(stored))

    async def RemoveWorkspaceMember(
        self, request: pb.RemoveWorkspaceMemberRequest, context
    ) -> pb.RemoveWorkspaceMemberResponse:
        removed = await self._accounts.remove_workspace_member(
            request.actor_principal_id, request.workspace_id, request.principal_id
        )
        return pb.RemoveWorkspaceMemberResponse(removed=removed)

    async def ListWorkspaceMembers(
        self, request: pb.ListWorkspaceMembersRequest, context
    ) -> pb.ListWorkspaceMembersResponse:
        members, token = await self._accounts.list_workspace_members(
            request.actor_principal_id,
            request.workspace_id,
            request.page_size,
            request.page_token,
        )
        return pb.ListWorkspaceMembersResponse(
            members=[member_to_proto(m) for m in members], next_page_token=token
        )

    async def AttachProject(
        self, request: pb.AttachProjectRequest, context
    ) -> pb.AttachProjectResponse:
        project, created = await self._accounts.attach_project(
            request.actor_principal_id, request.workspace_id, request.project
        )
        return pb.AttachProjectResponse(project=project_to_proto(project), created=created)

    async def ListInvitations(
        self, request: pb.ListInvitationsRequest, context
    ) -> pb.ListInvitationsResponse:
        invitations, token = await self._accounts.list_invitations(
            request.actor_principal_id, request.page_size, request.page_token
        )
        return pb.ListInvitationsResponse(
            invitations=[invitation_to_proto(i) for i in invitations], next_page_token=token
        )

    async def AcceptInvitation(
        self, request: pb.AcceptInvitationRequest, context
    ) -> pb.AcceptInvitationResponse:
        workspace, member = await self._accounts.accept_invitation(
            request.actor_principal_id, request.invitation_id
        )
        return pb.AcceptInvitationResponse(
            workspace=workspace_to_proto(workspace), member=member_to_proto(member)
        )

    async def DeclineInvitation(
        self, request: pb.DeclineInvitationRequest, context
    ) -> pb.DeclineInvitationResponse:
        invitation = await self._accounts.decline_invitation(
            request.actor_principal_id, request.invitation_id
        )
        return pb.DeclineInvitationResponse(invitation=invitation_to_proto(invitation))
