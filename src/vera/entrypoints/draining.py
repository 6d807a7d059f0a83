"""How both HTTP fronts stop: the first SIGTERM or SIGINT turns the readiness probe to 503
and refuses new requests with 503, while requests in flight get up to a grace period to
finish; only then does uvicorn close its listener and run the app's shutdown. A second
signal starts uvicorn's own shutdown at once (a second SIGINT forces it, as uvicorn does).

Uvicorn alone closes the listener at the first signal, so a probe could not tell "stopping"
from "gone", and a call that arrived a moment later would meet a refused connection
instead of an answer. This is the gRPC services' rule (``vera.rpc.server.CallGate``) at
the HTTP edge.
"""

from __future__ import annotations

import logging
import time
from types import FrameType
from typing import Any

import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from vera.config import HttpListenerSettings
from vera.entrypoints.connection_limits import bounded_http_protocol
from vera.entrypoints.unread_body import ClosesOnUnreadBody

log = logging.getLogger(__name__)

# Once the calls in flight are done, what uvicorn's own shutdown may still wait for (idle
# keep-alive connections to close).
SHUTDOWN_TIMEOUT_SECONDS = 5


class DrainGate:
    """ASGI middleware that counts HTTP requests in flight; once closed it answers the
    readiness paths and every new request with 503, and lets the ones in flight finish."""

    def __init__(self, app: ASGIApp, readiness_paths: frozenset[str]) -> None:
        self._app = app
        self._readiness = readiness_paths
        self.active = 0
        self.closed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self.closed:
            status = "stopping" if scope["path"] in self._readiness else "unavailable"
            refusal = JSONResponse(
                {"status": status},
                status_code=503,
                headers={"Retry-After": "1", "Connection": "close"},
            )
            await refusal(scope, receive, send)
            return
        self.active += 1
        try:
            await self._app(scope, receive, send)
        finally:
            self.active -= 1


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first stop signal closes ``gate`` and waits up to ``grace``
    seconds for the requests in flight before the usual shutdown."""

    def __init__(self, config: uvicorn.Config, gate: DrainGate, grace: float) -> None:
        super().__init__(config)
        self._gate = gate
        self._grace = grace
        self._drain_ends = 0.0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._gate.closed:
            super().handle_exit(sig, frame)
            return
        self._gate.closed = True
        self._drain_ends = time.monotonic() + self._grace
        log.info("stopping: readiness answers 503, %d request(s) in flight", self._gate.active)

    async def on_tick(self, counter: int) -> bool:
        if self._gate.closed and not self.should_exit:
            if self._gate.active == 0 or time.monotonic() >= self._drain_ends:
                if self._gate.active:
                    log.warning(
                        "%d request(s) still in flight after %.0f s", self._gate.active, self._grace
                    )
                self.should_exit = True
        return await super().on_tick(counter)


def serve(
    app: ASGIApp,
    *,
    readiness_paths: frozenset[str],
    grace: float,
    listener: HttpListenerSettings,
    **config: Any,
) -> None:
    """Runs ``app`` under uvicorn (``config``: uvicorn.Config's arguments) until a stop
    signal, then drains as described above; an answer given before the request's body was
    read closes its connection (``unread_body``), and the listener's header timeout and
    connection cap hold (``connection_limits``)."""
    gate = DrainGate(ClosesOnUnreadBody(app), readiness_paths)
    uvicorn_config = uvicorn.Config(
        gate,
        timeout_graceful_shutdown=SHUTDOWN_TIMEOUT_SECONDS,
        http=bounded_http_protocol(listener.header_timeout_seconds, listener.max_connections),
        **config,
    )
    DrainingServer(uvicorn_config, gate, grace).run()
