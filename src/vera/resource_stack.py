"""What a process part owns, closed in one place: pools, channels, indexes, models and the
background tasks that use them.

Every service's ``create`` builds its parts on a ``ResourceStack``: each part, once open,
says how it closes (``closing``), and a loop that runs beside the server is started with
``background``. If the build fails, leaving the ``async with`` closes what was opened so
far; once it succeeds, ``pop_all`` hands everything to the caller, whose ``aclose`` closes
it after the server has stopped (``vera.rpc.server.HostedService``).

Closing runs last in first out. A cleanup that fails is logged and the others still run:
a pool left open because an index failed to close would outlive the process's intent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Self

log = logging.getLogger(__name__)


class ResourceStack:
    """An async exit stack that also owns background tasks and sync or async cleanups."""

    def __init__(self, owner: str) -> None:
        self._owner = owner  # names the part in a failed cleanup's log line
        self._exits = contextlib.AsyncExitStack()

    def closing(self, cleanup: Callable[[], Any]) -> None:
        """Runs ``cleanup`` (a function, sync or returning an awaitable) at close."""

        async def run() -> None:
            try:
                done = cleanup()
                if asyncio.iscoroutine(done):
                    await done
            except Exception:
                log.exception("%s: a cleanup failed", self._owner)

        self._exits.push_async_callback(run)

    def background(self, loop: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Starts ``loop`` as a task, cancelled and awaited at close."""
        task = asyncio.get_running_loop().create_task(loop, name=name)
        self.closing(lambda: _cancel(task))
        return task

    def pop_all(self) -> ResourceStack:
        """A new stack owning everything this one did; this one is left empty."""
        moved = ResourceStack(self._owner)
        moved._exits = self._exits.pop_all()
        return moved

    async def aclose(self) -> None:
        await self._exits.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
