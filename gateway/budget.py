"""One time budget for a whole tool call (``VERA_MCP__REQUEST_BUDGET_SECONDS``).

Per-call deadlines alone add up: a bootstrap that resolves sixteen roots against an
identity service that never answers would wait sixteen deadlines. So the guard gives a
call one deadline, counted from the moment its HTTP request arrived, and every RPC made
for it carries ``timeout = min(the channel's default deadline, the time left)``: the
services learn when nobody waits any more, and an RPC attempted after the budget ran out
fails at once. Running out answers the seed's ``internal_error``, like any other
infrastructure failure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

from vera.config import RpcSettings
from vera.rpc.backends import Backends


class BudgetExhausted(TimeoutError):
    """The call's budget ran out before this RPC could be sent."""


class _BudgetedStub:
    """A service stub whose every method passes the time left in the budget as its timeout."""

    def __init__(
        self, stub: Any, default_seconds: float, deadline: float, clock: Callable[[], float]
    ) -> None:
        self._stub = stub
        self._default = default_seconds
        self._deadline = deadline
        self._clock = clock

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._stub, name)

        def call(request: Any, *, timeout: float | None = None, **kwargs: Any) -> Any:
            remaining = self._deadline - self._clock()
            if remaining <= 0:
                raise BudgetExhausted()
            limit = self._default if timeout is None else timeout
            return method(request, timeout=min(limit, remaining), **kwargs)

        return call


def budgeted(
    backends: Backends, rpc: RpcSettings, deadline: float, clock: Callable[[], float]
) -> Backends:
    """``backends`` whose stubs spend from one budget ending at ``deadline`` (on ``clock``)."""

    def stub(inner: Any, default_seconds: float) -> Any:
        return cast(Any, _BudgetedStub(inner, default_seconds, deadline, clock))

    return dataclasses.replace(
        backends,
        identity=stub(backends.identity, rpc.deadline_seconds),
        knowledge=stub(backends.knowledge, rpc.deadline_seconds),
        retrieval=stub(backends.retrieval, rpc.retrieval_deadline_seconds),
        snapshot=stub(backends.snapshot, rpc.deadline_seconds),
    )
