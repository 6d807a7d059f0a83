"""Wires the retrieval service: migrations, pool, knowledge channel, embedder, vector
index, the indexed facts, the change-log tailer (writer or follower, by the writer lease),
the ranking and the gRPC server; every part that needs closing goes on one ResourceStack.

A ``StartHook`` watches a start without patching it: the benches time each loading step
and read where the memory came from, tests stage the steps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import grpc

from vera.config import ConfigError, Settings
from vera.db.pool import open_service_database, service_dsn
from vera.observability.service_metrics import ServiceMetrics
from vera.resource_stack import ResourceStack
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import HostedService, RunningServer, ServiceBinding, create_server
from vera.services.retrieval.documents.index import DocumentIndex
from vera.services.retrieval.indexing.indexer import ChangeIndexer
from vera.services.retrieval.indexing.leadership import PgWriterLease
from vera.services.retrieval.memory.facts import FactMemory
from vera.services.retrieval.memory.snapshot_file import MemorySnapshot
from vera.services.retrieval.memory.snapshot_shared import SharedSnapshot
from vera.services.retrieval.models.embedding import DIMENSIONS, load_embedder
from vera.services.retrieval.models.rerankers import load_reranker
from vera.services.retrieval.pipeline.contract import assembler_version, embedding_version
from vera.services.retrieval.pipeline.retriever import Retriever
from vera.services.retrieval.ports import Embedder, Reranker, VectorIndex
from vera.services.retrieval.rank.feedback_source import KnowledgeFeedbackSource
from vera.services.retrieval.rank.learned import ActiveModels, FitPolicy
from vera.services.retrieval.rank.lifecycle import Ranking, RankingOptions
from vera.services.retrieval.rank.store import RankStore
from vera.services.retrieval.serving.api import RetrievalApi
from vera.services.retrieval.sources.knowledge import KnowledgeFactSource
from vera.services.retrieval.vectors.edge import EdgeVectorIndex
from vera.services.retrieval.vectors.payload import MEMORY_LOCATION

log = logging.getLogger(__name__)
T = TypeVar("T")

SCHEMA = "retrieval"
PACKAGE = "vera.services.retrieval"
# Under the data directory, beside the shard: the memory a restart reloads first.
MEMORY_SNAPSHOT = "memory/facts.snapshot"
SERVICE_NAME = retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].full_name
# The loading steps a StartHook sees, by name; the middle four run at once.
STEPS = ("database", "embedder", "vectors", "reranker", "memory", "ranking")


@dataclass(frozen=True)
class Parts:
    """The wired service, for a StartHook (what a bench reads, what a test reaches)."""

    index: DocumentIndex
    embedder: Embedder
    vectors: VectorIndex
    retriever: Retriever
    indexer: ChangeIndexer
    ranking: Ranking


class StartHook:
    """Watches a start. ``step`` runs each loading step of STEPS (the default just runs
    it); ``built`` sees the parts once wired, before anything serves."""

    async def step(self, name: str, load: Callable[[], Awaitable[T]]) -> T:
        return await load()

    def built(self, parts: Parts) -> None:
        """Nothing by default."""


async def create(
    settings: Settings,
    address: str,
    *,
    embedder: Embedder | None = None,
    hook: StartHook | None = None,
) -> HostedService:
    """Builds the bound (not yet started) service. ``embedder`` lets tests share one model
    across services; when given, the caller owns it. ``hook`` runs each loading step and
    sees the parts once wired (``StartHook``: the retrieval-start bench times the steps
    with it, the start tests stage them)."""
    hook = hook or StartHook()
    async with ResourceStack("retrieval") as resources:
        loaded = await _load(settings, embedder, hook, resources)
        running = await _serve(settings, address, loaded, hook, resources)
        return HostedService(running=running, aclose=resources.pop_all().aclose)


@dataclass(frozen=True)
class _Loaded:
    """What the loading steps opened, for the wiring."""

    pool: asyncpg.Pool
    channel: grpc.aio.Channel
    index: DocumentIndex
    embedder: Embedder
    vectors: VectorIndex
    reranker: Reranker
    position: int


async def _load(
    settings: Settings, embedder: Embedder | None, hook: StartHook, resources: ResourceStack
) -> _Loaded:
    rs = settings.retrieval

    async def open_database() -> asyncpg.Pool:
        return await open_service_database(settings, SCHEMA, PACKAGE)

    pool = await hook.step("database", open_database)
    resources.closing(pool.close)
    channel = open_channel(
        settings.services.knowledge, settings.rpc.deadline_seconds,
        auth_key=settings.rpc.auth_key, caller="retrieval")
    resources.closing(channel.close)
    dimensions = DIMENSIONS if embedder is None else embedder.dimensions
    embedding = embedding_version(rs)
    index = DocumentIndex(
        pool,
        FactMemory(dimensions),
        snapshot=MemorySnapshot(settings.data_dir / MEMORY_SNAPSHOT, embedding),
        shared=_shared_snapshot(settings, pool),
    )
    resources.closing(index.close)

    async def load_own_embedder() -> Embedder:
        owned = await load_embedder(
            rs.model_path, rs.embed_threads, settings.model_cache_dir, rs.embedding_precision
        )
        resources.closing(owned.close)
        return owned

    async def open_vectors() -> VectorIndex:
        vectors = await open_vector_index(settings, dimensions)
        resources.closing(vectors.close)
        return vectors

    async def open_reranker() -> Reranker:
        reranker = await load_reranker(rs.reranker_path, rs.model_path, limit=rs.rerank_limit)
        resources.closing(reranker.close)
        return reranker

    async def load_memory() -> int:
        # Where the memory stands once loaded (the load reads the cursor in its
        # snapshot); 0 when the stored vectors are another model's.
        position = await index.load()
        return position if await index.indexed_embedding() == embedding else 0

    # At once: the model and the shard load in native code (the GIL released) while
    # the memory refills from PostgreSQL, so a start takes about the longest of them.
    loaded_embedder, vectors, reranker, position = await _all_or_none(
        hook.step("embedder", load_own_embedder if embedder is None else _given(embedder)),
        hook.step("vectors", open_vectors),
        hook.step("reranker", open_reranker),
        hook.step("memory", load_memory),
    )
    return _Loaded(pool, channel, index, loaded_embedder, vectors, reranker, position)


async def _serve(
    settings: Settings,
    address: str,
    loaded: _Loaded,
    hook: StartHook,
    resources: ResourceStack,
) -> RunningServer:
    """Wires the loaded parts, binds the server and starts the loops beside it."""
    rs = settings.retrieval
    source = KnowledgeFactSource(loaded.channel, settings.rpc.deadline_seconds)
    lease = PgWriterLease(service_dsn(settings), retry_seconds=rs.writer_retry_seconds)
    resources.closing(lease.release)
    indexer = ChangeIndexer(
        source,
        loaded.embedder,
        loaded.vectors,
        loaded.index,
        embedding=embedding_version(rs),
        poll_seconds=rs.index_poll_seconds,
        lease=lease,
        shared_vectors=_qdrant_server(settings),
        loaded_position=loaded.position,
    )
    learned = ActiveModels()
    retriever = Retriever(
        loaded.embedder,
        loaded.vectors,
        loaded.index,
        source,
        candidate_pool=rs.candidate_pool,
        reranker=loaded.reranker,
        assembler_version=assembler_version(rs),
        learned=learned,
    )
    ranking = _ranking(settings, loaded, retriever, learned)
    await hook.step("ranking", ranking.refresh)
    hook.built(Parts(loaded.index, loaded.embedder, loaded.vectors, retriever, indexer, ranking))
    running = create_server(
        [
            ServiceBinding(
                SERVICE_NAME,
                RetrievalApi(retriever, indexer, ranking),
                retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server,
            )
        ],
        address,
        settings,
    )
    _report(running.metrics, loaded.pool, indexer, ranking)
    resources.background(indexer.run(), "retrieval-indexer")
    in_charge = lambda: indexer.writing  # noqa: E731
    for loop in (ranking.watch(), ranking.auto_fit(in_charge), ranking.guard(in_charge)):
        resources.background(loop, "retrieval-ranking")
    if rs.memory_snapshot_seconds > 0:
        resources.background(
            loaded.index.keep_snapshots(rs.memory_snapshot_seconds), "retrieval-snapshot")
    return running


def _ranking(
    settings: Settings, loaded: _Loaded, retriever: Retriever, learned: ActiveModels
) -> Ranking:
    rs = settings.retrieval
    rank = rs.rank
    return Ranking(
        RankStore(loaded.pool),
        KnowledgeFeedbackSource(loaded.channel, max_rows_per_principal=rank.max_rows_per_principal),
        retriever,
        learned,
        RankingOptions(
            policy=FitPolicy(
                min_rows=rank.min_feedback_rows,
                min_packs=rank.min_packs,
                min_gain=rank.min_gain,
            ),
            max_training_rows=rank.max_training_rows,
            poll_seconds=rank.poll_seconds,
            auto_fit_new_feedback=rank.auto_fit_new_feedback,
            auto_fit_check_seconds=rank.auto_fit_check_seconds,
            replay_queries=rank.replay_queries,
            guard_check_seconds=rank.guard_check_seconds,
            guard_min_queries=rank.guard_min_queries,
            guard_max_queries=rank.guard_max_queries,
            guard_margin=rank.guard_margin,
        ),
        version_for=lambda model_id: assembler_version(rs, rank_model=model_id),
    )


def _given(embedder: Embedder) -> Callable[[], Awaitable[Embedder]]:
    """The loading step of a model the caller passed in (and owns)."""

    async def given() -> Embedder:
        return embedder

    return given


def _report(
    metrics: ServiceMetrics, pool: asyncpg.Pool, indexer: ChangeIndexer, ranking: Ranking
) -> None:
    metrics.pool(SCHEMA, pool)

    def lag() -> float | None:
        indexed = indexer.indexed_position
        return None if indexed is None else float(max(0, indexer.head_position - indexed))

    metrics.gauge(
        "vera_retrieval_index_lag_changes",
        "Changes of knowledge's change log this replica has not indexed yet.", lag)
    metrics.counter(
        "vera_retrieval_rank_switch_offs",
        "Learned ranking models the serving check switched off (behind the hand-set order).",
        lambda: float(ranking.switch_offs))


async def _all_or_none(*steps: Awaitable[Any]) -> list[Any]:
    """Runs the start-up steps concurrently and raises the first failure as itself once
    every step has ended. The others are not cancelled: a step cancelled while its worker
    thread opens something would leave that open with no cleanup registered; each step
    registers its own once done."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _shared_snapshot(settings: Settings, pool: asyncpg.Pool) -> SharedSnapshot | None:
    rs = settings.retrieval
    if not rs.share_memory_snapshot:
        return None
    if rs.snapshot_signing_key is None:
        raise ConfigError(
            "VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY: required with"
            " VERA_RETRIEVAL__SHARE_MEMORY_SNAPSHOT (each shared copy is signed with it)"
        )
    return SharedSnapshot(pool, rs.snapshot_signing_key.get_secret_value().encode())


def _qdrant_server(settings: Settings) -> bool:
    """Whether the vectors live in a Qdrant server every replica reads."""
    url = settings.retrieval.qdrant_url
    return bool(url) and url != MEMORY_LOCATION


async def open_vector_index(settings: Settings, dimensions: int) -> VectorIndex:
    """A Qdrant server or ``:memory:`` through qdrant-client; otherwise (the embedded
    default) an HNSW shard of qdrant-edge under ``<data_dir>/vectors``."""
    rs = settings.retrieval
    if rs.qdrant_url:
        # Imported here: qdrant-client is ~0.7 s of a start the embedded default does not need.
        from vera.services.retrieval.vectors.qdrant import QdrantVectorIndex, open_client

        return await QdrantVectorIndex.open(
            lambda: open_client(rs.qdrant_url, settings.data_dir, rs.qdrant_api_key),
            rs.qdrant_collection,
            dimensions,
            server=_qdrant_server(settings),
        )
    return await EdgeVectorIndex.open(settings.data_dir / "vectors", dimensions)
