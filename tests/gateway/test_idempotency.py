"""Idempotency keys on write tools through the real MCP client: the Idempotency-Key header
or params._meta.idempotencyKey, stored in the real snapshot service."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness import LOCAL_TOKEN_KEY, mcp_client
from mcp import Client
from mcp.shared.exceptions import MCPError
from snapshot_harness import real_snapshot, serve, settings_for

from vera.errors import Unavailable
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.snapshot.v1 import snapshot_pb2_grpc

PROPOSAL = {
    "subject": "billing",
    "predicate": "uses_database",
    "object": "postgres",
    "task_ref": "T-1",
}


def client(url: str, header: str | None = None) -> Client:
    return mcp_client(url, headers={"Idempotency-Key": header} if header else None)


async def call(
    url: str, tool: str, args: dict, *, key: str | None = None, header: str | None = None
) -> dict:
    meta = {"idempotencyKey": key} if key is not None else None
    async with client(url, header) as c:
        result = await c.call_tool(tool, args, meta=meta)
    assert not result.is_error
    return result.structured_content


async def refused(
    url: str, tool: str, args: dict, *, key: str | None = None, header: str | None = None
) -> MCPError:
    meta = {"idempotencyKey": key} if key is not None else None
    async with client(url, header) as c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool(tool, args, meta=meta)
    return caught.value


@pytest.fixture
async def snap(pg_dsn):
    async with real_snapshot(pg_dsn) as running:
        yield running


async def count(snap, table: str) -> int:
    return await snap.pool.fetchval(f"SELECT count(*) FROM {table}")


async def test_snapshot_retry_with_the_same_key_replays_the_first_result(snap):
    async with serve(snap.settings(tool_profile="advanced")) as url:
        first = await call(url, "knowledge_create_snapshot", {"project": "acme"}, key="snap-1")
        again = await call(url, "knowledge_create_snapshot", {"project": "acme"}, key="snap-1")
        by_header = await call(
            url, "knowledge_create_snapshot", {"project": "acme"}, header="snap-1"
        )
        assert again == first == by_header
        assert await count(snap, "snapshots") == 1
        # The same key with a different body is refused, and nothing runs.
        error = await refused(url, "knowledge_create_snapshot", {"project": "globex"}, key="snap-1")
        assert error.code == -32602
        assert error.data["field"] == "idempotency_key"
        assert await count(snap, "snapshots") == 1
        # Without a key, creation is not idempotent (the seed's annotation).
        await call(url, "knowledge_create_snapshot", {"project": "acme"})
        await call(url, "knowledge_create_snapshot", {"project": "acme"}, key="snap-2")
        assert await count(snap, "snapshots") == 3


async def test_header_and_parameter_must_agree_before_the_tool_runs(snap):
    async with serve(snap.settings(tool_profile="advanced")) as url:
        error = await refused(url, "knowledge_create_snapshot", {}, key="a", header="b")
        assert error.code == -32602
        assert error.data["field"] == "idempotency_key"
        assert error.data["reason"] == "header_parameter_mismatch"
        assert await count(snap, "snapshots") == 0
        assert await count(snap, "idempotency_keys") == 0
        same = await call(url, "knowledge_create_snapshot", {}, key="a", header="a")
        assert same["fact_count"] == 0
        for bad in ("x" * 256, "has space"):
            error = await refused(url, "knowledge_create_snapshot", {}, key=bad)
            assert error.code == -32602
            assert error.data["field"] == "idempotency_key"
        assert await count(snap, "snapshots") == 1


async def test_keys_survive_a_gateway_restart(snap):
    settings = snap.settings(tool_profile="advanced")
    async with serve(settings) as url:
        first = await call(url, "knowledge_create_snapshot", {}, key="durable")
    async with serve(settings) as url:  # a fresh gateway (or another replica)
        again = await call(url, "knowledge_create_snapshot", {}, key="durable")
    assert again == first
    assert await count(snap, "snapshots") == 1


async def test_replayed_propose_still_reaches_knowledge_for_the_report(snap):
    async with serve(snap.settings()) as url:
        first = await call(url, "knowledge_propose", PROPOSAL, key="p-1")
        again = await call(url, "knowledge_propose", PROPOSAL, key="p-1")
    assert again == first
    assert first["outcome"] == "created"
    # The retry reached knowledge, which records it as a deduplicated attempt.
    assert len(snap.log.proposals) == 2
    assert snap.log.proposals[0] == snap.log.proposals[1]


async def test_a_failed_call_releases_its_key(snap):
    async with serve(snap.settings()) as url:
        snap.log.fail_propose = True
        error = await refused(url, "knowledge_propose", PROPOSAL, key="p-2")
        assert error.code == -32603
        assert await count(snap, "idempotency_keys") == 0
        snap.log.fail_propose = False
        created = await call(url, "knowledge_propose", PROPOSAL, key="p-2")
        assert created["attempt_id"] == "att-2"


async def test_feedback_and_retract_accept_keys_and_reads_ignore_them(snap):
    async with serve(snap.settings()) as url:
        pack = await call(url, "knowledge_get_context", {"query": "db", "persist": True})
        vote = {"context_pack_id": pack["pack_id"], "result_ref": "ref-fact-1", "signal": "up"}
        first = await call(url, "knowledge_feedback", vote, key="fb-1")
        assert await call(url, "knowledge_feedback", vote, key="fb-1") == first
        assert len(snap.log.feedback) == 1
        # A read tool declares no idempotency: a reused key has no effect on it.
        await call(url, "knowledge_search", {"query": "a"}, key="same")
        await call(url, "knowledge_search", {"query": "b"}, key="same")
        assert await count(snap, "idempotency_keys") == 1


async def test_a_replayed_proposal_is_reported_as_deduplicated(pg_dsn):
    """Against the real knowledge service: the replay returns the first result and the
    end-of-task report shows the retry as a deduplicated attempt."""
    from harness import identity_stand_in, knowledge_address, knowledge_settings
    from snapshot_harness import Identity

    from vera.config import McpSettings, ObservabilitySettings, Settings

    async with (
        identity_stand_in(Identity()) as stand_in,
        knowledge_address(knowledge_settings(pg_dsn, pool_max_size=2)) as knowledge,
        real_snapshot(pg_dsn) as snap,
    ):
        settings = Settings(
            environment="local",
            mcp=McpSettings(local_token_key=LOCAL_TOKEN_KEY, port=0, quota_enabled=False),
            services={
                "identity": stand_in,
                "knowledge": knowledge,
                "retrieval": stand_in,
                "snapshot": snap.address,
            },
            observability=ObservabilitySettings(mcp_metrics_enabled=False),
        )
        async with serve(settings) as url:
            first = await call(url, "knowledge_propose", PROPOSAL, key="real-1")
            again = await call(url, "knowledge_propose", PROPOSAL, key="real-1")
            report = await call(url, "knowledge_proposal_report", {"task_ref": "T-1"})
        assert again == first
        assert first["outcome"] == "created"
        counts = {k: v for k, v in report["counts"].items() if v}
        assert counts == {"created": 1, "deduplicated": 1}
        assert report["total"] == 2


class FlakyComplete(snapshot_pb2_grpc.SnapshotServiceServicer):
    """The real snapshot service behind a proxy whose CompleteIdempotentCall fails
    ``failures`` times first (the database blipped after the tool's write)."""

    def __init__(self, upstream: snapshot_pb2_grpc.SnapshotServiceStub, failures: int,
                 delay: float = 0.0) -> None:
        self.upstream = upstream
        self.failures = failures
        self.delay = delay
        self.completes = 0
        self.recorded = asyncio.Event()  # set once a result reached the snapshot service

    async def CompleteIdempotentCall(self, request, context):
        self.completes += 1
        await asyncio.sleep(self.delay)
        if self.failures > 0:
            self.failures -= 1
            raise Unavailable()
        response = await self.upstream.CompleteIdempotentCall(request)
        self.recorded.set()
        return response

    async def BeginIdempotentCall(self, request, context):
        return await self.upstream.BeginIdempotentCall(request)

    async def ReleaseIdempotentCall(self, request, context):
        return await self.upstream.ReleaseIdempotentCall(request)

    async def CreateSnapshot(self, request, context):
        return await self.upstream.CreateSnapshot(request)


@contextlib.asynccontextmanager
async def flaky(snap, failures: int, delay: float = 0.0,
                **mcp: Any) -> AsyncIterator[tuple[str, FlakyComplete]]:
    proxy = FlakyComplete(snap.stub, failures, delay)
    running = create_server(
        [
            ServiceBinding(
                "vera.snapshot.v1.SnapshotService",
                proxy,
                snapshot_pb2_grpc.add_SnapshotServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await running.server.start()
    await mark_serving(running)
    address = f"127.0.0.1:{running.port}"
    settings = settings_for(snap.fakes_address, address, tool_profile="advanced", **mcp)
    try:
        async with serve(settings) as url:
            yield url, proxy
    finally:
        await running.stop(0)


async def test_a_failed_complete_is_retried_so_a_retry_replays_instead_of_writing(snap):
    async with flaky(snap, failures=1) as (url, proxy):
        first = await call(url, "knowledge_propose", PROPOSAL, key="p-flaky")
        again = await call(url, "knowledge_propose", PROPOSAL, key="p-flaky")
        made = await call(url, "knowledge_create_snapshot", {}, key="s-flaky")
        assert await call(url, "knowledge_create_snapshot", {}, key="s-flaky") == made
    assert first["outcome"] == "created" and again == first
    # One write; the replay reached knowledge only to be reported as deduplicated.
    assert len(snap.log.proposals) == 2
    assert await count(snap, "snapshots") == 1
    assert proxy.completes == 3


async def test_an_unrecorded_result_leaves_a_retry_refused_as_in_progress(snap):
    async with flaky(snap, failures=100) as (url, _proxy):
        made = await call(url, "knowledge_create_snapshot", {}, key="s-lost")
        assert made["snapshot_id"]
        error = await refused(url, "knowledge_create_snapshot", {}, key="s-lost")
    assert error.code == -32602
    assert (error.data["field"], error.data["reason"]) == ("idempotency_key", "in_progress")
    assert await count(snap, "snapshots") == 1


async def test_a_write_that_ends_with_the_budget_is_still_recorded_for_its_retry(snap):
    # Recording the result takes longer than the call's budget has left: the caller's
    # call runs out, but the write is recorded, so the retry replays it (one snapshot).
    async with flaky(snap, failures=0, delay=1.5, request_budget_seconds=1.0) as (url, proxy):
        error = await refused(url, "knowledge_create_snapshot", {}, key="s-late")
        assert error.data["code"] == "internal_error"
        # The shielded record finishes after the caller's budget ran out.
        async with asyncio.timeout(30):
            await proxy.recorded.wait()
        proxy.delay = 0.0
        replayed = await call(url, "knowledge_create_snapshot", {}, key="s-late")
    assert replayed["snapshot_id"]
    assert await count(snap, "snapshots") == 1
