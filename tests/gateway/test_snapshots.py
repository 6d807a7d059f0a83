"""Snapshots and persisted context packs through the real MCP client, against the real
snapshot service (real PostgreSQL, controllable clock)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from harness import mcp_client, serve_service, without_ids
from mcp.shared.exceptions import MCPError
from snapshot_harness import (
    ONTOLOGY_VERSION,
    OTHER,
    SHARED,
    log_fact,
    real_snapshot,
    serve,
)

from vera.config import Settings
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.quota import InMemoryQuotaStore
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.timestamps import from_timestamp
from vera.services.retrieval import server as retrieval_server
from vera.services.retrieval.models.embedding import MiniLMEmbedder
from vera.snapshot.v1 import snapshot_pb2

T0 = datetime(2030, 1, 1, tzinfo=UTC)  # the harness clock's start
DAY = timedelta(days=1)


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


async def call(url: str, tool: str, arguments: dict) -> dict:
    async with mcp_client(url) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error
    return result.structured_content


async def refused(url: str, tool: str, arguments: dict) -> MCPError:
    async with mcp_client(url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool(tool, arguments)
    return caught.value


@pytest.fixture
async def snap(pg_dsn):
    async with real_snapshot(pg_dsn) as running:
        yield running


def seed_log(snap) -> None:
    record = snap.log.record
    scope = SHARED.project_id
    record(
        log_fact(
            "fact-1",
            scope,
            T0 - 2 * DAY,
            sources=(("adr-1", T0 - 10 * DAY), ("adr-2", T0 - 3 * DAY)),
        )
    )
    # Corrected: v1 superseded before the snapshot, v2 current.
    record(log_fact("fact-2", scope, T0 - 5 * DAY, version="v1"))
    record(
        log_fact(
            "fact-2",
            scope,
            T0 - 5 * DAY,
            version="v1",
            state=knowledge_pb2.FACT_STATE_SUPERSEDED,
            superseded=T0 - DAY,
        )
    )
    record(log_fact("fact-2", scope, T0 - DAY, version="v2", sources=(("adr-1", T0 - 10 * DAY),)))
    record(log_fact("fact-3", scope, T0 + timedelta(hours=1)))  # recorded after the freeze
    record(log_fact("fact-4", OTHER.project_id, T0 - DAY))  # another project
    record(log_fact("fact-5", scope, T0 - 3 * DAY, valid_to=T0 - DAY))  # no longer true
    record(log_fact("fact-6", scope, T0 - DAY, state=knowledge_pb2.FACT_STATE_RETRACTED))


async def test_create_snapshot_freezes_active_facts_and_get_returns_its_metadata(snap):
    seed_log(snap)
    async with serve(snap.settings(tool_profile="advanced")) as url:
        created = await call(url, "knowledge_create_snapshot", {"project": "acme"})
        assert created["project"] == {"project_id": SHARED.project_id, "slug": "acme"}
        assert created["fact_count"] == 2
        assert created["as_of"] == created["known_as_of"] == created["created_at"] == iso(T0)
        assert created["versions"] == {
            "assembler": "assembler-1;minilm-l6-v2;index-1",
            "ontology": ONTOLOGY_VERSION,
            "policy": "assembler-1",
            "embedding": "minilm-l6-v2",
            "index": "index-1",
        }
        assert created["source_boundaries"] == {
            "source_count": 2,
            "oldest_observed_at": iso(T0 - 10 * DAY),
            "newest_observed_at": iso(T0 - 3 * DAY),
            "change_position": len(snap.log.changes),
        }
        again = await call(url, "knowledge_get_snapshot", {"snapshot_id": created["snapshot_id"]})
    assert again == created
    frozen = await snap.pool.fetch(
        "SELECT version_id FROM snapshot_facts WHERE snapshot_id = $1 ORDER BY version_id",
        uuid.UUID(created["snapshot_id"]),
    )
    assert [r["version_id"] for r in frozen] == ["fact-1-v1", "fact-2-v2"]
    # Immutable at the database, not only by convention.
    with pytest.raises(asyncpg.PostgresError):
        await snap.pool.execute("UPDATE snapshots SET fact_count = 99")
    with pytest.raises(asyncpg.PostgresError):
        await snap.pool.execute("DELETE FROM snapshot_facts")


async def test_as_of_sets_the_valid_time_boundary(snap):
    seed_log(snap)
    async with serve(snap.settings(tool_profile="advanced")) as url:
        created = await call(
            url, "knowledge_create_snapshot", {"project": "acme", "as_of": iso(T0 - 2 * DAY)}
        )
    # fact-5 was still true then; fact-2's current version (valid since always) counts too.
    assert created["as_of"] == iso(T0 - 2 * DAY)
    assert created["known_as_of"] == iso(T0)
    assert created["fact_count"] == 3


async def test_replay_pins_scope_and_both_time_boundaries(snap):
    async with serve(snap.settings(tool_profile="advanced")) as url:
        created = await call(url, "knowledge_create_snapshot", {"project": "acme"})
        snap.clock.advance(DAY)  # later writes happen after this
        sid = created["snapshot_id"]
        snap.retrieval.requests.clear()
        context = await call(url, "knowledge_get_context", {"query": "db", "snapshot_id": sid})
        assembled = snap.retrieval.requests[-1]
        assert assembled.scope_id == SHARED.project_id
        assert from_timestamp(assembled.filters, "as_of") == T0
        assert from_timestamp(assembled.filters, "known_as_of") == T0
        assert context["request"]["snapshot_id"] == sid
        assert context["request"]["project"]["slug"] == "acme"

        snap.retrieval.requests.clear()
        await call(url, "knowledge_search", {"query": "db", "snapshot_id": sid})
        searched = snap.retrieval.requests[0]
        assert list(searched.scope_ids) == [SHARED.project_id]
        assert from_timestamp(searched.filters, "as_of") == T0
        assert from_timestamp(searched.filters, "known_as_of") == T0
        # The same project named explicitly is fine; another one is refused.
        await call(
            url, "knowledge_get_context", {"query": "db", "snapshot_id": sid, "project": "acme"}
        )
        error = await refused(
            url, "knowledge_get_context", {"query": "db", "snapshot_id": sid, "project": "globex"}
        )
        assert error.code == -32602
        assert (error.data["code"], error.data["field"]) == ("invalid_input", "project")


async def test_search_replay_checks_the_version_search_reports_without_a_probe(snap):
    async with serve(snap.settings(tool_profile="advanced")) as url:
        created = await call(url, "knowledge_create_snapshot", {})
        snap.retrieval.requests.clear()
        await call(url, "knowledge_search", {"query": "db", "snapshot_id": created["snapshot_id"]})
        assert [type(r).__name__ for r in snap.retrieval.requests] == ["SearchRequest"]


async def test_creating_a_snapshot_reads_the_contract_version_without_assembling(snap):
    async with serve(snap.settings(tool_profile="advanced")) as url:
        snap.retrieval.requests.clear()
        await call(url, "knowledge_create_snapshot", {})
        assert [type(r).__name__ for r in snap.retrieval.requests] == ["GetIndexStatusRequest"]


async def test_replay_under_another_contract_version_fails_closed(snap):
    async with serve(snap.settings(tool_profile="advanced")) as url:
        created = await call(url, "knowledge_create_snapshot", {})
        snap.retrieval.version = "assembler-2;minilm-l6-v2;index-1"
        for tool in ("knowledge_get_context", "knowledge_search"):
            error = await refused(url, tool, {"query": "db", "snapshot_id": created["snapshot_id"]})
            assert error.code == -32007
            assert error.data["code"] == "unsupported_version"
        # Without a snapshot the current contract serves as usual.
        await call(url, "knowledge_get_context", {"query": "db"})


@pytest.fixture(scope="module")
async def embedder():
    model = await MiniLMEmbedder.load(None, threads=2)
    yield model
    model.close()


@contextlib.asynccontextmanager
async def real_retrieval(snap, dsn: str, data_dir: Path, embedder, **retrieval):
    """A real retrieval service over the harness's knowledge change log; yields its
    address once it has indexed the whole log."""
    settings = Settings(
        data_dir=data_dir,
        database={"dsn": dsn},
        services={"knowledge": snap.fakes_address},
        retrieval={"index_poll_seconds": 0.02, **retrieval},
    )
    async with serve_service(retrieval_server, settings, embedder=embedder) as address:
        channel = open_channel(address, deadline_seconds=30)
        try:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            head = len(snap.log.changes)
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                status = await stub.GetIndexStatus(retrieval_pb2.GetIndexStatusRequest())
                if status.indexed_position >= head:
                    break
                assert asyncio.get_running_loop().time() < deadline, status
                await asyncio.sleep(0.05)
        finally:
            await channel.close()
        yield address


# Ranking inputs a real retrieval service can be restarted with here (the contract's own
# tests show every input, model paths and stages included, moves the version).
RECONFIGURED = {
    "rerank-limit": {"rerank_limit": 5},
    "candidate-pool": {"candidate_pool": 30},
    "index": {"qdrant_url": ":memory:"},
    "precision": {"embedding_precision": "float32"},
}


async def test_a_snapshot_made_under_one_ranking_fails_closed_under_another(
    snap, pg_dsn, tmp_path, embedder
):
    """A snapshot pins the contract the real retrieval service reports; the same service
    restarted with the same settings replays it, restarted with another ranking refuses."""
    seed_log(snap)
    data_dir = tmp_path / "retrieval"
    async with real_retrieval(snap, pg_dsn, data_dir, embedder) as retrieval:
        async with serve(snap.settings(retrieval=retrieval, tool_profile="advanced")) as url:
            created = await call(url, "knowledge_create_snapshot", {})
            replay = {"query": "db", "snapshot_id": created["snapshot_id"]}
            first = await call(url, "knowledge_get_context", replay)
    assert first["assembler_version"] == created["versions"]["assembler"]
    assert first["results"]
    async with real_retrieval(snap, pg_dsn, data_dir, embedder) as retrieval:
        async with serve(snap.settings(retrieval=retrieval, tool_profile="advanced")) as url:
            again = await call(url, "knowledge_get_context", replay)
            assert again["assembler_version"] == created["versions"]["assembler"]
            await call(url, "knowledge_search", replay)
    for name, changed in RECONFIGURED.items():
        async with real_retrieval(snap, pg_dsn, data_dir, embedder, **changed) as retrieval:
            async with serve(snap.settings(retrieval=retrieval, tool_profile="advanced")) as url:
                for tool in ("knowledge_get_context", "knowledge_search"):
                    error = await refused(url, tool, replay)
                    assert (error.code, error.data["code"]) == (-32007, "unsupported_version"), (
                        name,
                        tool,
                    )
                # Without the snapshot the reconfigured service serves as usual.
                await call(url, "knowledge_get_context", {"query": "db"})


async def test_missing_and_foreign_snapshots_read_the_same(snap):
    foreign = await snap.stub.CreateSnapshot(
        snapshot_pb2.CreateSnapshotRequest(
            principal_id=str(uuid.uuid4()),
            scope_id=SHARED.project_id,
            assembler_version="assembler-1;minilm-l6-v2;index-1",
        )
    )
    async with serve(snap.settings(tool_profile="advanced")) as url:
        for sid in (foreign.snapshot.snapshot_id, str(uuid.uuid4()), "not-a-uuid"):
            for tool, args in (
                ("knowledge_get_snapshot", {"snapshot_id": sid}),
                ("knowledge_get_context", {"query": "db", "snapshot_id": sid}),
                ("knowledge_search", {"query": "db", "snapshot_id": sid}),
            ):
                error = await refused(url, tool, args)
                assert error.code == -32602
                assert error.data["field"] == "snapshot_id"
                assert error.data["reason"] == "not_found"


async def test_snapshot_creation_draws_from_the_snapshot_bucket(snap):
    store = InMemoryQuotaStore(clock=lambda: 1_700_000_010.0)
    settings = snap.settings(tool_profile="advanced", quota_enabled=True, quota_snapshot_per_hour=2)
    async with serve(settings, quota_store=store, clock=lambda: 1_700_000_010.0) as url:
        for _ in range(2):
            await call(url, "knowledge_create_snapshot", {})
        error = await refused(url, "knowledge_create_snapshot", {})
        assert error.code == -32003
        assert error.data["bucket"] == "snapshot"
        # Reads are budgeted apart.
        await call(url, "knowledge_search", {"query": "db"})
    assert await snap.pool.fetchval("SELECT count(*) FROM snapshots") == 2


# Persisted context packs ------------------------------------------------------------------


async def test_expired_pack_is_swept_without_other_writes_then_reads_expired(pg_dsn):
    async with (
        real_snapshot(pg_dsn, sweep_interval_seconds=0.02, pack_ttl_days=30) as snap,
        serve(snap.settings()) as url,
    ):
        persisted = await call(url, "knowledge_get_context", {"query": "db", "persist": True})
        pack_id = persisted["pack_id"]
        assert persisted["expires_at"] == iso(T0 + timedelta(days=30))
        fetched = await call(url, "knowledge_get_context_pack", {"pack_id": pack_id})
        assert fetched["results"] == persisted["results"]

        snap.clock.advance(timedelta(days=30))
        # Nothing else is written: the maintenance sweeper alone removes the row.
        for _ in range(500):
            if await snap.pool.fetchval("SELECT count(*) FROM context_packs") == 0:
                break
            await asyncio.sleep(0.01)
        assert await snap.pool.fetchval("SELECT count(*) FROM context_packs") == 0

        error = await refused(url, "knowledge_get_context_pack", {"pack_id": pack_id})
        assert error.code == -32006
        assert without_ids(error.data) == {"code": "expired_context_pack"}


async def test_pack_storage_quota_per_scope(pg_dsn):
    async with (
        real_snapshot(pg_dsn, pack_quota_bytes_per_scope=6000) as snap,
        serve(snap.settings()) as url,
    ):
        first = await call(url, "knowledge_get_context", {"query": "db", "persist": True})
        # An identical retry deduplicates and is not charged again.
        again = await call(url, "knowledge_get_context", {"query": "db", "persist": True})
        assert again["pack_id"] == first["pack_id"]
        big = {"query": "x" * 8000, "persist": True}
        error = await refused(url, "knowledge_get_context", big)
        assert error.code == -32003
        assert error.data["bucket"] == "context_pack_storage"
        # Another scope has its own quota; the ephemeral default is never refused.
        await call(
            url, "knowledge_get_context", {"query": "db", "project": "globex", "persist": True}
        )
        await call(url, "knowledge_get_context", {"query": "x" * 8000})
        # Expired packs stop counting, even before the sweeper removes them.
        snap.clock.advance(timedelta(days=30))
        small = await call(url, "knowledge_get_context", {"query": "db2", "persist": True})
        assert small["persisted"] is True


async def test_usage_ref_is_attributed_without_splitting_the_pack(snap):
    async with serve(snap.settings()) as url:
        first = await call(
            url, "knowledge_get_context", {"query": "db", "persist": True, "usage_ref": "ci-7"}
        )
        second = await call(
            url, "knowledge_get_context", {"query": "db", "persist": True, "usage_ref": "ci-8"}
        )
    assert second["pack_id"] == first["pack_id"]
    assert "usage_ref" not in first["request"]
    assert await snap.pool.fetchval("SELECT count(*) FROM context_packs") == 1
    rows = await snap.pool.fetch(
        "SELECT pack_id::text AS pack_id, usage_ref FROM context_pack_usage ORDER BY usage_ref"
    )
    assert [(r["pack_id"], r["usage_ref"]) for r in rows] == [
        (first["pack_id"], "ci-7"),
        (first["pack_id"], "ci-8"),
    ]
