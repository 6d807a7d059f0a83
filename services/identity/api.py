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

    async def ListAuditRecords(self, request, context):
        return await list_audit_records(self._audit, request, pb)

    async def EnsureLocalPrincipal(self, request, context):
        # The local principal reads as an administrator: only a local-dev identity
        # service hands it out.
        if not self._local_dev:
            raise Unauthorized("the local principal exists only in the local-dev profile")
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

    async def AuthorizeCurator(self, request, context):
        project = await self._service.authorize_curator(request.principal_id, request.project)
        return pb.AuthorizeCuratorResponse(project=project_to_proto(project))

    async def EnsureExternalPrincipal(self, request, context):
        principal, created = await self._service.ensure_external_principal(
            request.issuer, request.subject, request.email, request.email_verified
        )
        return pb.EnsureExternalPrincipalResponse(
            principal=principal_to_proto(principal), created=created
        )

    async def ChargeQuota(self, request, context):
        allowed = await self._service.charge_quota(
            request.key, request.window_start, request.limit
        )
        return pb.ChargeQuotaResponse(allowed=allowed)

    async def ResolveRepository(self, request, context):
        result = await self._service.resolve_repository(request.principal_id, request.repository)
        return pb.ResolveRepositoryResponse(
            resolution=RESOLUTIONS[result.resolution],
            canonical_repository=result.canonical_repository,
            candidates=[project_to_proto(p) for p in result.candidates],
        )

    # Accounts: users, API keys, workspaces (services/identity/accounts.py) ----------------

    async def CreateUser(self, request, context):
        principal = await self._accounts.create_user(
            request.actor_principal_id,
            request.display_name,
            request.admin,
            request.email,
            request.email_issuer,
        )
        return pb.CreateUserResponse(principal=principal_to_proto(principal))

    async def CreateApiKey(self, request, context):
        key, secret = await self._accounts.create_api_key(request.principal_id, request.label)
        return pb.CreateApiKeyResponse(key=api_key_to_proto(key), api_key=secret)

    async def AuthenticateApiKey(self, request, context):
        principal, key_id = await self._accounts.authenticate_api_key(request.api_key)
        return pb.AuthenticateApiKeyResponse(
            principal=principal_to_proto(principal), key_id=key_id
        )

    async def ListUsers(self, request, context):
        users, token = await self._accounts.list_users(
            request.actor_principal_id, request.page_size, request.page_token
        )
        return pb.ListUsersResponse(
            users=[principal_to_proto(u) for u in users], next_page_token=token
        )

    async def SetUserDisabled(self, request, context):
        principal, changed = await self._accounts.set_user_disabled(
            request.actor_principal_id, request.principal_id, request.disabled
        )
        return pb.SetUserDisabledResponse(
            principal=principal_to_proto(principal), changed=changed
        )

    async def RecordMcpTokenMinted(self, request, context):
        await self._accounts.record_mcp_token_minted(request.principal_id, request.key_id)
        return pb.RecordMcpTokenMintedResponse()

    async def RecordRefusals(self, request, context):
        self._accounts.record_refusals(
            request.source, request.window_seconds,
            [(c.action, c.reason, c.count) for c in request.counts])
        return pb.RecordRefusalsResponse()

    async def CheckCredential(self, request, context):
        state, principal = await self._accounts.check_credential(
            request.principal_id, request.key_id
        )
        active = state is CredentialState.ACTIVE
        return pb.CheckCredentialResponse(
            state=CREDENTIAL_STATES[state],
            principal=principal_to_proto(principal) if active else None,
        )

    async def ListApiKeys(self, request, context):
        keys, token = await self._accounts.list_api_keys(
            request.principal_id, request.page_size, request.page_token,
            request.actor_principal_id,
        )
        return pb.ListApiKeysResponse(
            keys=[api_key_to_proto(k) for k in keys], next_page_token=token
        )

    async def RevokeApiKey(self, request, context):
        revoked = await self._accounts.revoke_api_key(
            request.principal_id, request.key_id, request.actor_principal_id
        )
        return pb.RevokeApiKeyResponse(revoked=revoked)

    async def CreateWorkspace(self, request, context):
        workspace = await self._accounts.create_workspace(
            request.actor_principal_id,
            request.slug,
            request.display_name,
            request.owner_principal_id,
        )
        return pb.CreateWorkspaceResponse(workspace=workspace_to_proto(workspace))

    async def SetWorkspaceMember(self, request, context):
        role = ROLES_FROM_PROTO.get(request.role)
        if role is None:
            raise InvalidInput("role")
        stored = await self._accounts.set_workspace_member(
            request.actor_principal_id, request.workspace_id, request.principal_id, role
        )
        if isinstance(stored, Invitation):
            return pb.SetWorkspaceMemberResponse(invitation=invitation_to_proto(stored))
        return pb.SetWorkspaceMemberResponse(member=member_to_proto(stored))

    async def RemoveWorkspaceMember(self, request, context):
        removed = await self._accounts.remove_workspace_member(
            request.actor_principal_id, request.workspace_id, request.principal_id
        )
        return pb.RemoveWorkspaceMemberResponse(removed=removed)

    async def ListWorkspaceMembers(self, request, context):
        members, token = await self._accounts.list_workspace_members(
            request.actor_principal_id,
            request.workspace_id,
            request.page_size,
            request.page_token,
        )
        return pb.ListWorkspaceMembersResponse(
            members=[member_to_proto(m) for m in members], next_page_token=token
        )

    async def AttachProject(self, request, context):
        project, created = await self._accounts.attach_project(
            request.actor_principal_id, request.workspace_id, request.project
        )
        return pb.AttachProjectResponse(project=project_to_proto(project), created=created)

    async def ListInvitations(self, request, context):
        invitations, token = await self._accounts.list_invitations(
            request.actor_principal_id, request.page_size, request.page_token
        )
        return pb.ListInvitationsResponse(
            invitations=[invitation_to_proto(i) for i in invitations], next_page_token=token
        )

    async def AcceptInvitation(self, request, context):
        workspace, member = await self._accounts.accept_invitation(
            request.actor_principal_id, request.invitation_id
        )
        return pb.AcceptInvitationResponse(
            workspace=workspace_to_proto(workspace), member=member_to_proto(member)
        )

    async def DeclineInvitation(self, request, context):
        invitation = await self._accounts.decline_invitation(
            request.actor_principal_id, request.invitation_id
        )
        return pb.DeclineInvitationResponse(invitation=invitation_to_proto(invitation))
