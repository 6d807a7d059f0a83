"""The id that ties an error a client received to the log lines of the same request: the
trace id while the request is traced (and sampled), otherwise a request id the HTTP front
made for it. An error's ``data`` carries it as ``trace_id`` or ``request_id``; every log
line written while the request runs carries the same key and value
(``vera.logs.configure_logging``, ``context=log_fields``)."""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from typing import Any

from vera.observability import tracing

_request_id: ContextVar[str | None] = ContextVar("vera_request_id", default=None)
# Whether the id above was made for an error outside any HTTP request's own id (an MCP tool
# call runs in the session's task, not the request's): the next error gets a new one, so
# two errors never share an id.
_made_for_error: ContextVar[bool] = ContextVar("vera_request_id_made_for_error",
                                               default=False)

TRACE_ID = "trace_id"
REQUEST_ID = "request_id"


def _current() -> dict[str, str]:
    trace_id = tracing.current_trace_id()
    if trace_id is not None:
        return {TRACE_ID: trace_id}
    request_id = _request_id.get()
    return {REQUEST_ID: request_id} if request_id is not None else {}


def log_fields() -> dict[str, str]:
    """What a log line written now carries (nothing outside a request)."""
    return _current()


def error_fields() -> dict[str, str]:
    """What an error about to reach a client carries in ``data``: the request's id, made
    now (and kept for the lines that follow) where the front made none."""
    found = _current()
    if found and not (REQUEST_ID in found and _made_for_error.get()):
        return found
    request_id = uuid.uuid4().hex
    _request_id.set(request_id)
    _made_for_error.set(True)
    return {REQUEST_ID: request_id}


class RequestIds:
    """ASGI middleware: every HTTP request runs with an id of its own."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _request_id.set(uuid.uuid4().hex)
        made = _made_for_error.set(False)
        try:
            await self.app(scope, receive, send)
        finally:
            _made_for_error.reset(made)
            _request_id.reset(token)
