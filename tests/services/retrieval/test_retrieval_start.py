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
from vera.services.retrieval.models.rerankers import RerankerUnavailable
from vera.services.retrieval.vectors.edge import EdgeVectorIndex

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


class Staged(server.StartHook):
    """Each of the four loading steps waits until all four have started: run one after
    another, the first never returns (and times out)."""

    AT_ONCE = ("embedder", "vectors", "reranker", "memory")

    def __init__(self) -> None:
        self.started = {name: asyncio.Event() for name in self.AT_ONCE}

    async def step(self, name, load):
        if name in self.started:
            self.started[name].set()
            await asyncio.wait_for(
                asyncio.gather(*(e.wait() for e in self.started.values())), STEP_WAIT_SECONDS
            )
        return await load()


async def test_the_model_shard_reranker_and_memory_load_at_once(
    pg_dsn: str, tmp_path: Path
) -> None:
    staged = Staged()
    hosted = await server.create(
        _settings(pg_dsn, tmp_path), "127.0.0.1:0", embedder=StandInEmbedder(), hook=staged
    )
    await hosted.running.server.stop(0)
    await hosted.aclose()
    assert all(e.is_set() for e in staged.started.values())


class FailingReranker(server.StartHook):
    """The reranker's step fails; the shard's opens before or after that failure."""

    def __init__(self, shard_opens: str) -> None:
        self.shard_opens = shard_opens
        self.opened, self.failed = asyncio.Event(), asyncio.Event()
        self.shard: EdgeVectorIndex | None = None

    async def step(self, name, load):
        if name == "vectors":
            if self.shard_opens == "after the failure":
                await asyncio.wait_for(self.failed.wait(), STEP_WAIT_SECONDS)
            self.shard = await load()
            self.opened.set()
            return self.shard
        if name == "reranker":
            if self.shard_opens == "before the failure":
                await asyncio.wait_for(self.opened.wait(), STEP_WAIT_SECONDS)
            self.failed.set()
            raise RerankerUnavailable("VERA_RETRIEVAL__RERANKER_PATH: not a model directory")
        return await load()


@pytest.mark.parametrize("shard_opens", ["before the failure", "after the failure"])
async def test_a_failed_step_is_raised_as_itself_and_the_opened_shard_is_closed(
    pg_dsn: str, tmp_path: Path, shard_opens: str
) -> None:
    """Also when the shard opens only after a sibling step failed: a worker thread cannot
    be cancelled, so the start waits for every step before raising."""
    hook = FailingReranker(shard_opens)
    with pytest.raises(RerankerUnavailable):
        await server.create(
            _settings(pg_dsn, tmp_path), "127.0.0.1:0", embedder=StandInEmbedder(), hook=hook
        )
    assert hook.shard is not None and hook.shard._closed


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
