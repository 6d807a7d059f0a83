"""The console's Jinja templates, loaded from the package and autoescaped."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from vera.api.curating import principal_handle


def _when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return ""
    return datetime.fromtimestamp(stamp.seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _total(reply: Any) -> str:
    """A list reply's total, "at least N" when the service stopped counting."""
    return f"at least {reply.total}" if reply.total_is_lower_bound else str(reply.total)


_environment = Environment(
    loader=PackageLoader("vera.api.console", "templates"),
    autoescape=select_autoescape(default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_environment.filters["when"] = _when
_environment.filters["total"] = _total
_environment.filters["handle"] = principal_handle


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """``template`` with ``context`` (and the request); every value is HTML-escaped."""
    text = _environment.get_template(template).render(request=request, **context)
    return HTMLResponse(text, status_code=status)
