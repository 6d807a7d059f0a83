"""Which internal calls gRPC retries, and how: the one home of that list.

Only calls without side effects are retried, and only on UNAVAILABLE (the server could not
be reached, was stopping, or a dependency of it could not be reached): a read asked twice
answers the same. A write is never retried here, even one the server would deduplicate,
because UNAVAILABLE may arrive after the write committed (the reply was lost) and the
caller must see that outcome rather than a second attempt's. gRPC itself spaces the attempts
(exponential backoff, each delay drawn at random up to the current bound, so callers that
failed together do not retry together), keeps them inside the call's deadline, and stops
retrying altogether while most calls on the channel fail (retry throttling).
"""

from __future__ import annotations

import json
from typing import Any

# Attempts per call, including the first; gRPC caps this at 5.
MAX_ATTEMPTS = 3
INITIAL_BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 1.0
BACKOFF_MULTIPLIER = 2
RETRYABLE_STATUS_CODES = ("UNAVAILABLE",)

# Full service name -> its methods that have no side effects.
READ_METHODS: dict[str, tuple[str, ...]] = {
    "vera.identity.v1.IdentityService": (
        "GetPrincipal",
        "ResolveScopes",
        "ResolveProject",
        "ResolveRepository",
        "AuthorizeCurator",
        "AuthenticateApiKey",
        "ListApiKeys",
        "ListWorkspaceMembers",
        "ListInvitations",
    ),
    "vera.knowledge.v1.KnowledgeService": (
        "BatchGetFacts",
        "ExplainFact",
        "GetProposalReport",
        "GetProposalPolicy",
        "ListChanges",
        "GetFact",
        "GetEntity",
        "GetSource",
        "ExploreGraph",
        "ListConflicts",
        "ListScopeChanges",
        "SearchCommunities",
        "GetCommunityLineage",
        "ListPendingProposals",
        "ListConflictedAttempts",
        "ListSources",
        "ListCitedLines",
        "GetCurationSettings",
        "ListRankingFeedback",
    ),
    "vera.retrieval.v1.RetrievalService": (
        "Search",
        "AssembleContext",
        "GetIndexStatus",
        "GetRankStatus",
    ),
    "vera.snapshot.v1.SnapshotService": ("GetContextPack", "GetSnapshot"),
}


def _seconds(value: float) -> str:
    return f"{value:g}s"


def service_config() -> dict[str, Any]:
    """The gRPC service config every internal channel is opened with."""
    return {
        "methodConfig": [
            {
                "name": [
                    {"service": service, "method": method}
                    for service, methods in READ_METHODS.items()
                    for method in methods
                ],
                "retryPolicy": {
                    "maxAttempts": MAX_ATTEMPTS,
                    "initialBackoff": _seconds(INITIAL_BACKOFF_SECONDS),
                    "maxBackoff": _seconds(MAX_BACKOFF_SECONDS),
                    "backoffMultiplier": BACKOFF_MULTIPLIER,
                    "retryableStatusCodes": list(RETRYABLE_STATUS_CODES),
                },
            }
        ],
        # Each failure spends a token and each success returns a tenth of one; below half
        # of the ten, no call is retried, so an outage is not multiplied by retries.
        "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
        # Calls, not connections, are spread over every address the target resolves to: a
        # `dns:///` name of a headless Service lists each replica (the chart), where one
        # long-lived channel through a ClusterIP would reach a single replica for its life.
        # Only replicas whose standard health service says SERVING get calls, so one that
        # is still loading or already draining is passed over (vera.rpc.server).
        "loadBalancingConfig": [{"round_robin": {}}],
        "healthCheckConfig": {"serviceName": ""},
    }


# How soon a channel dials a peer again after a failed connect. gRPC's default starts at
# 1 s and grows 1.6x to 120 s, so a channel that met a service still starting (or
# restarting after a crash) could wait ~10 s after the service came up before trying again;
# internal peers are near, so retry within a second. (Not grpc.min_reconnect_backoff_ms:
# that is the shortest a connect attempt may take before it is abandoned, and a short one
# fails calls to a peer that is slow to answer the handshake, e.g. paused or busy.)
RECONNECT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)

CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(service_config())),
    *RECONNECT_OPTIONS,
)
