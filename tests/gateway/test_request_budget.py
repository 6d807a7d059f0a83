"""One budget per tool call (VERA_MCP__REQUEST_BUDGET_SECONDS): a bootstrap with sixteen
roots against a slow identity service, or one that never answers, ends within the budget,
and every RPC it makes carries the time left as its deadline, never more than its
channel's default."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness import LOCAL_TOKEN_KEY, mcp_client, without_ids
from mcp.shared.exceptions import MCPError

from vera.config import McpSettings, ObservabilitySettings, RpcSettings, ServiceAddresses, Settings
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.server import ServiceBinding, create_server, mark_serving

BUDGET = 1.0
ROOTS = [{"repository": f"https://github.com/acme/repo-{n}"} for n in range(16)]


class StalledIdentity(identity_pb2_grpc.IdentityServiceServicer):
    """Answers the principal and its scopes at once and each repository resolution after
    ``resolve_seconds``; with ``stall_all`` it never answers anything. Records the time
    left of each stalled or slow call."""

    def __init__(self, *, stall_all: bool, resolve_seconds: float = 0.0) -> None:
        self.stall_all = stall_all
        self.resolve_seconds = resolve_seconds
        self.time_left: list[float] = []

    async def _stall(self, context) -> None:
        self.time_left.append(context.time_remaining())
        await asyncio.Event().wait()  # until the caller's deadline cancels the call

    async def EnsureLocalPrincipal(self, request, context):
        if self.stall_all:
            await self._stall(context)
        return identity_pb2.EnsureLocalPrincipalResponse(
            principal=identity_pb2.Principal(
                principal_id=request.principal_id, personal_scope_id="scope-personal"
            )
        )

    async def ResolveScopes(self, request, context):
        if self.stall_all:
            await self._stall(context)
        return identity_pb2.ResolveScopesResponse(personal_scope_id="scope-personal")

    async def ResolveRepository(self, request, context):
        if self.stall_all:
            await self._stall(context)
        self.time_left.append(context.time_remaining())
        await asyncio.sleep(self.resolve_seconds)
        return identity_pb2.ResolveRepositoryResponse(
            resolution=identity_pb2.REPOSITORY_RESOLUTION_UNMAPPED
        )


@contextlib.asynccontextmanager
async def stalled_identity(**behaviour: Any) -> AsyncIterator[tuple[str, StalledIdentity]]:
    servicer = StalledIdentity(**behaviour)
    running = create_server(
        [
            ServiceBinding(
                "vera.identity.v1.IdentityService",
                servicer,
                identity_pb2_grpc.add_IdentityServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await running.server.start()
    await mark_serving(running)
    try:
        yield f"127.0.0.1:{running.port}", servicer
    finally:
        await running.stop(0)


def budget_settings(identity: str, others: str, rpc: RpcSettings) -> Settings:
    return Settings(
        environment="local",
        mcp=McpSettings(
            local_token_key=LOCAL_TOKEN_KEY,
            port=0,
            quota_enabled=False,
            request_budget_seconds=BUDGET,
        ),
        rpc=rpc,
        services=ServiceAddresses(
            identity=identity, knowledge=others, retrieval=others, snapshot=others
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )


async def bootstrap_error(url: str) -> MCPError:
    async with mcp_client(url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("knowledge_bootstrap", {"roots": ROOTS})
        return caught.value


async def test_sixteen_roots_against_a_slow_identity_end_within_the_budget(serve, fakes):
    # Each resolution answers within its 0.4 s deadline; seventeen in a row (5 s) do not
    # fit the 1 s budget.
    rpc = RpcSettings(deadline_seconds=0.4)
    async with (
        stalled_identity(stall_all=False, resolve_seconds=0.3) as (address, identity),
        serve(budget_settings(address, fakes.address, rpc)) as gw,
    ):
        error = await bootstrap_error(gw.url)
    assert error.error.code == -32603
    assert without_ids(error.error.data) == {"code": "internal_error"}
    # Every resolution was sent with at most the channel default, the last one with what
    # was left of the budget, and the budget stopped the bootstrap well before root 16.
    assert 2 <= len(identity.time_left) < 6
    assert max(identity.time_left) <= 0.4 + 0.05
    assert identity.time_left[-1] < 0.4


async def test_an_identity_that_never_answers_costs_one_budget(serve, fakes):
    # The channel default (10 s) is far longer than the budget: the budget wins.
    async with (
        stalled_identity(stall_all=True) as (address, identity),
        serve(budget_settings(address, fakes.address, RpcSettings())) as gw,
    ):
        error = await bootstrap_error(gw.url)
    # The principal is resolved at the HTTP boundary, before the tool runs: identity not
    # answering within the budget is an outage there.
    assert without_ids(error.error.data) == {"code": "internal_error", "reason": "unavailable"}
    # The deadline the stalled call was sent with is the budget, not the channel's 10 s:
    # that, not a stopwatch, shows the budget ended it.
    assert identity.time_left and max(identity.time_left) <= BUDGET + 0.05
