"""Which calling component may call which internal method: the one table services check an
assertion's ``sub`` against (vera.rpc.auth).

Each component gets the methods its code calls and nothing more, so an assertion replayed
from one component's traffic, or a bug in it, reaches no other method. The CLI is the
operator's tool: it holds the deployment key itself and drives ingest, accounts, ranking
and the benchmarks' workloads, so it is allowed every method; restricting it would stop no
one who has the key.
"""

from __future__ import annotations

from collections.abc import Mapping

IDENTITY = "vera.identity.v1.IdentityService"
KNOWLEDGE = "vera.knowledge.v1.KnowledgeService"
RETRIEVAL = "vera.retrieval.v1.RetrievalService"
SNAPSHOT = "vera.snapshot.v1.SnapshotService"

EVERY_METHOD = "*"
CLI = "cli"

_LOCAL_PRINCIPAL = "EnsureLocalPrincipal"  # both fronts' local-dev profile

METHODS_BY_CALLER: Mapping[str, Mapping[str, frozenset[str]]] = {
    "gateway": {
        IDENTITY: frozenset({
            _LOCAL_PRINCIPAL, "EnsureExternalPrincipal", "CheckCredential",
            "ResolveScopes", "ResolveProject", "ResolveRepository", "ChargeQuota",
            "RecordRefusals"}),
        KNOWLEDGE: frozenset({
            "ExplainFact", "ProposeFact", "RetractProposal", "GetProposalReport",
            "RecordFeedback", "GetFact", "GetEntity", "GetSource", "ExploreGraph",
            "ListConflicts", "ListScopeChanges", "SearchCommunities", "GetCommunityLineage",
            "GetProposalPolicy"}),
        RETRIEVAL: frozenset({"Search", "AssembleContext", "GetIndexStatus"}),
        SNAPSHOT: frozenset({
            "CreateContextPack", "GetContextPack", "CreateSnapshot", "GetSnapshot",
            "BeginIdempotentCall", "CompleteIdempotentCall", "ReleaseIdempotentCall"}),
    },
    "api": {
        IDENTITY: frozenset({
            _LOCAL_PRINCIPAL, "AuthenticateApiKey", "CheckCredential", "GetPrincipal",
            "ResolveScopes",
            "CreateUser", "CreateApiKey", "ListApiKeys", "RevokeApiKey",
            "CreateWorkspace", "SetWorkspaceMember", "RemoveWorkspaceMember",
            "ListWorkspaceMembers", "AttachProject", "ListInvitations", "AcceptInvitation",
            "DeclineInvitation", "AuthorizeCurator", "EnsureProject", "MapRepository",
            "ResolveProject", "ListAuditRecords", "ListUsers", "SetUserDisabled",
            "RecordMcpTokenMinted", "RecordRefusals"}),
        KNOWLEDGE: frozenset({
            "BatchGetFacts", "ListPendingProposals", "VerifyProposal", "RejectProposal",
            "GetCurationSettings", "SetCurationSettings",
            "ListConflictedAttempts", "RetractSource", "ListSources", "ListScopeChanges",
            "ErasePrincipalData", "GetSource", "IngestKnowledge", "CorrectFact",
            "ProposeFacts", "ListCitedLines", "RecordCitationDrift", "ListAuditRecords"}),
        RETRIEVAL: frozenset({"GetIndexStatus"}),
        SNAPSHOT: frozenset({"ErasePrincipalData", "ListAuditRecords"}),
    },
    "retrieval": {
        KNOWLEDGE: frozenset({"ListChanges", "BatchGetFacts", "ListRankingFeedback"}),
    },
    "snapshot": {
        KNOWLEDGE: frozenset({"ListChanges"}),
    },
    CLI: {EVERY_METHOD: frozenset({EVERY_METHOD})},
}


def split_method(path: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``)."""
    service, _, method = path.lstrip("/").partition("/")
    return service, method


def may_call(caller: str, path: str) -> bool:
    """Whether ``caller`` may call the method at ``path`` (``/pkg.Service/Method``)."""
    allowed = METHODS_BY_CALLER.get(caller)
    if allowed is None:
        return False
    service, method = split_method(path)
    methods = allowed.get(service, allowed.get(EVERY_METHOD, frozenset()))
    return method in methods or EVERY_METHOD in methods
