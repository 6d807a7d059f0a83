"""The console's Jinja templates, loaded from the package and autoescaped."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from google.protobuf.timestamp_pb2 import Timestamp
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from vera.api.curating import principal_handle


def _when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return ""
    return datetime.fromtimestamp(stamp.seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _segment(value: str) -> str:
    """``value`` as one URL path segment: everything encoded, "/" included (Jinja's own
    ``urlencode`` keeps "/", so a source id's "../" would steer a link)."""
    return quote(str(value), safe="")


def _total(reply: Any) -> str:
    """A list reply's total, "at least N" when the service stopped counting."""
    return f"at least {reply.total}" if reply.total_is_lower_bound else str(reply.total)


# The change feed's kinds (services/knowledge/graph.CHANGE_KINDS) as a curator reads them.
CHANGE_LABELS = {
    "published": "Published",
    "correction": "Correction recorded",
    "corrected": "Corrected by a newer version",
    "retracted": "Retracted",
    "proposed": "Proposed by an agent",
    "evidence_added": "Evidence added",
    "source_updated": "Source updated",
}


def _change_label(kind: str) -> str:
    return CHANGE_LABELS.get(kind, kind.replace("_", " ").capitalize())


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
_environment.filters["segment"] = _segment
_environment.filters["change_label"] = _change_label


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """``template`` with ``context`` (and the request); every value is HTML-escaped."""
    text = _environment.get_template(template).render(request=request, **context)
    return HTMLResponse(text, status_code=status)
