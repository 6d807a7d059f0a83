"""A retrieval replica's start: the model, the vector shard, the reranker and the memory
refill from PostgreSQL run at once (real PostgreSQL, the embedded shard; the slow steps
are stand-ins that wait for each other), a step that fails is raised as itself and what
the others opened is closed, and the start path imports no library it does not serve with."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from vera.config import Settings
from vera.services.retrieval import server
from vera.services.retrieval.lexical.index import PgLexicalIndex
from vera.services.retrieval.pipeline.rerank import RerankerUnavailable

STEP_WAIT_SECONDS = 10.0


class StandInEmbedder:
    dimensions = 3

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]

    def close(self) -> None:
        """Nothing to release."""


def _settings(pg_dsn: str, data_dir: Path) -> Settings:
    # Knowledge is never dialled before the test stops the service (the tailer backs off).
    return Settings(
        data_dir=data_dir, database={"dsn": pg_dsn}, services={"knowledge": "127.0.0.1:9"}
    )


async def test_the_model_shard_reranker_and_memory_load_at_once(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step waits until all four have started: one after another, the first never
    returns (and times out)."""
    started = {name: asyncio.Event() for name in ("model", "shard", "reranker", "memory")}

    def step(name: str, load):
        async def waiting(*args, **kwargs):
            started[name].set()
            await asyncio.wait_for(
                asyncio.gather(*(e.wait() for e in started.values())), STEP_WAIT_SECONDS
            )
            return await load(*args, **kwargs)

        return waiting

    async def load_model(*args, **kwargs):
        return StandInEmbedder()

    monkeypatch.setattr(server, "load_embedder", step("model", load_model))
    monkeypatch.setattr(server, "open_vector_index", step("shard", server.open_vector_index))
    monkeypatch.setattr(server, "load_reranker", step("reranker", server.load_reranker))
    monkeypatch.setattr(PgLexicalIndex, "load", step("memory", PgLexicalIndex.load))

    hosted = await server.create(_settings(pg_dsn, tmp_path), "127.0.0.1:0")
    await hosted.running.server.stop(0)
    await hosted.aclose()
    assert all(e.is_set() for e in started.values())


@pytest.mark.parametrize("shard_opens", ["before the failure", "after the failure"])
async def test_a_failed_step_is_raised_as_itself_and_the_opened_shard_is_closed(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shard_opens: str
) -> None:
    """Also when the shard opens only after a sibling step failed: a worker thread cannot
    be cancelled, so the start waits for every step before raising."""
    opened, failed = asyncio.Event(), asyncio.Event()
    closed: list[str] = []
    open_vector_index = server.open_vector_index

    async def open_and_record(*args, **kwargs):
        if shard_opens == "after the failure":
            await asyncio.wait_for(failed.wait(), STEP_WAIT_SECONDS)
        index = await open_vector_index(*args, **kwargs)
        close = index.close

        async def recording_close() -> None:
            closed.append("shard")
            await close()

        index.close = recording_close
        opened.set()
        return index

    async def failing_reranker(*args, **kwargs):
        if shard_opens == "before the failure":
            await asyncio.wait_for(opened.wait(), STEP_WAIT_SECONDS)
        failed.set()
        raise RerankerUnavailable("VERA_RETRIEVAL__RERANKER_PATH: not a model directory")

    monkeypatch.setattr(server, "open_vector_index", open_and_record)
    monkeypatch.setattr(server, "load_reranker", failing_reranker)
    with pytest.raises(RerankerUnavailable):
        await server.create(_settings(pg_dsn, tmp_path), "127.0.0.1:0", embedder=StandInEmbedder())
    assert closed == ["shard"]


def test_the_start_path_imports_no_training_model_or_client_library() -> None:
    """`vera serve retrieval` builds the CLI's parser and imports the service: neither may
    import scikit-learn (fits run rarely, in the background), transformers or torch (the
    ONNX embedder serves), the MCP client (only `vera doctor` uses it) or qdrant-client
    (only a configured Qdrant server or `:memory:` needs it): together they were ~6 s of
    a replica's start."""
    code = (
        "import sys; from vera.cli import build_parser; build_parser(); "
        "import vera.services.retrieval.server; "
        "print(sorted(m for m in ('sklearn', 'transformers', 'torch', 'mcp', 'qdrant_client') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
