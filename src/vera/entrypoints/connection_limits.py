"""What uvicorn does not bound on a connection, bounded on both HTTP fronts: how long a
client may take to send a request's headers, and how many connections one process holds.

Uvicorn arms no timer before a request's headers are whole (its keep-alive timer runs only
between requests, and the first byte of the next request disarms it), so a client that
opens connections and trickles header bytes in holds a file descriptor each for ever. Its
``limit_concurrency`` answers 503 to requests over the limit but still accepts and keeps
the connections. Here a connection whose headers are not whole within ``header_timeout``
seconds of its first byte (or of being opened) is closed, and a connection beyond
``max_connections`` is closed as soon as it is accepted. The body has its own deadline
(``body_timeout_seconds``, in each app).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def bounded_http_protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """Uvicorn's HTTP protocol (httptools) with both bounds; pass it as ``http=``."""

    class BoundedHttpProtocol(HttpToolsProtocol):
        _header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.close()
                return
            self._arm_header_deadline()

        def data_received(self, data: bytes) -> None:
            if self._between_requests():
                self._arm_header_deadline()
            super().data_received(data)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._disarm_header_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_deadline()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm_header_deadline(self) -> None:
            if self._header_deadline is None:
                self._header_deadline = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm_header_deadline(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _headers_late(self) -> None:
            self._header_deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return BoundedHttpProtocol
