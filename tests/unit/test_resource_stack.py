"""vera.resource_stack: what a service's ``create`` opens is closed once, last first,
whether the build fails or the service stops; and every service and `vera up`'s
supervisor build on it."""

from __future__ import annotations

import ast
import asyncio
import logging
from pathlib import Path

import pytest

from vera.resource_stack import ResourceStack

ROOT = Path(__file__).resolve().parents[2]
SERVERS = sorted((ROOT / "services").glob("*/server.py"))
SUPERVISOR = ROOT / "src" / "vera" / "stack" / "supervisor.py"
MAX_LINES = 80


async def test_cleanups_run_last_first_sync_or_async() -> None:
    closed: list[str] = []

    async def close_pool() -> None:
        closed.append("pool")

    async with ResourceStack("test") as resources:
        resources.closing(close_pool)
        resources.closing(lambda: closed.append("channel"))
    assert closed == ["channel", "pool"]


async def test_a_failed_build_closes_what_was_opened() -> None:
    closed: list[str] = []
    started = asyncio.Event()

    async def loop() -> None:
        started.set()
        await asyncio.Event().wait()

    with pytest.raises(RuntimeError):
        async with ResourceStack("test") as resources:
            resources.closing(lambda: closed.append("pool"))
            task = resources.background(loop(), "loop")
            await started.wait()
            raise RuntimeError("the index did not open")
    assert closed == ["pool"]
    assert task.cancelled()


async def test_a_handed_over_stack_closes_only_when_its_owner_closes_it() -> None:
    closed: list[str] = []
    async with ResourceStack("test") as resources:
        resources.closing(lambda: closed.append("pool"))
        task = resources.background(asyncio.Event().wait(), "loop")
        owned = resources.pop_all()
    assert closed == []
    assert not task.done()
    await owned.aclose()
    assert closed == ["pool"]
    assert task.cancelled()


async def test_a_failing_cleanup_is_logged_and_the_others_still_run(caplog) -> None:
    closed: list[str] = []

    def broken() -> None:
        raise OSError("index file vanished")

    async def crashed() -> None:
        raise ValueError("the loop failed")

    resources = ResourceStack("test")
    resources.closing(lambda: closed.append("pool"))
    resources.background(crashed(), "loop")
    resources.closing(broken)
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="vera.resource_stack"):
        await resources.aclose()
    assert closed == ["pool"]
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [OSError, ValueError]


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text())
    return [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_every_service_create_and_run_stack_build_on_one_resource_stack() -> None:
    assert {p.parent.name for p in SERVERS} == {"identity", "knowledge", "retrieval", "snapshot"}
    entries = [(path, "create") for path in SERVERS] + [(SUPERVISOR, "run_stack")]
    for path, name in entries:
        entry = next(f for f in _functions(path) if f.name == name)
        stacks = [n for n in ast.walk(entry) if isinstance(n, ast.AsyncWith)
                  and any(isinstance(i.context_expr, ast.Call)
                          and getattr(i.context_expr.func, "id", "") == "ResourceStack"
                          for i in n.items)]
        assert len(stacks) == 1, path


def test_no_function_of_a_service_entry_point_or_the_supervisor_is_over_80_lines() -> None:
    long = [f"{path.relative_to(ROOT)}:{f.name}" for path in [*SERVERS, SUPERVISOR]
            for f in _functions(path)
            if (f.end_lineno or f.lineno) - f.lineno + 1 > MAX_LINES]
    assert long == []
