"""Both HTTP fronts close a connection whose request body was not read to its end.

An answer may come before the body is whole: a 408 for a body trickled in too slowly, a
413 cut off mid-stream, a Host or Origin refusal made on the headers alone. Uvicorn then
waits for the rest of the body, and it re-arms its keep-alive timer only once a body is
whole while every byte received cancels it, so a client that keeps trickling bytes would
hold the connection for as long as it likes. Saying ``Connection: close`` on such an
answer makes uvicorn close the connection once the answer is sent.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_CLOSE = (b"connection", b"close")


class ClosesOnUnreadBody:
    """ASGI middleware: an answer that starts while the request's body is still due says
    ``Connection: close``."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        due = "transfer-encoding" in headers or headers.get("content-length", "0") != "0"

        async def tracked_receive() -> Message:
            nonlocal due
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                due = False
            return message

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and due:
                sent = list(message.get("headers", []))
                if not any(name.lower() == b"connection" for name, _ in sent):
                    message = {**message, "headers": [*sent, _CLOSE]}
            await send(message)

        await self._app(scope, tracked_receive, closing_send)
