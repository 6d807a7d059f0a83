"""The in-process memory on its own worker thread: every read and write of it runs there,
so the event loop never waits on its arithmetic and the memory needs no lock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from vera.services.retrieval.memory.facts import FactMemory

T = TypeVar("T")


class MemoryWorker:
    def __init__(self, memory: FactMemory) -> None:
        self.memory = memory  # replaced by a load from a snapshot (on this thread's behalf)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-lexical")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
