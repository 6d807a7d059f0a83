"""The seed's MCP error contract, and the one table that maps service errors onto it.

Every guarded failure leaves the gateway as ``MCPError(code, message, data)`` where
``data.code`` is the stable slug a client branches on. Messages are fixed strings, except
that an ``invalid_input`` message names the field, its reason and any did-you-mean (as
``data`` does): they never carry a refused value, a query, a principal id or an internal
exception text.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from mcp.shared.exceptions import MCPError

from vera.errors import VeraError
from vera.observability import correlation
from vera.text import untrusted

log = logging.getLogger(__name__)

# data.code -> (JSON-RPC integer code, fixed message); GUIDE §Structured Error Contract.
ERROR_CODES: dict[str, tuple[int, str]] = {
    "unauthenticated": (-32001, "no valid credential was presented"),
    "unauthorized": (-32002, "this tool requires an additional authorization scope"),
    "invalid_input": (-32602, "an argument is out of range or invalid"),
    "quota_exceeded": (-32003, "a per-principal quota bucket is exhausted"),
    "ambiguous_project": (-32004, "no project was given and the scope is ambiguous"),
    "project_out_of_scope": (-32005, "the requested project is outside the caller's scopes"),
    "expired_context_pack": (-32006, "the context pack has expired or does not exist"),
    "unsupported_version": (-32007, "the requested contract version is not served"),
    "internal_error": (-32603, "the tool failed unexpectedly"),
}


# Names a message may repeat: the server's own field names (``facts[3].evidence``), reason
# codes and predicates. Anything else a client chose (an odd argument name) stays in data.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\[\]-]{1,64}")


def _named(value: Any) -> str | None:
    return value if isinstance(value, str) and _PLAIN_NAME.fullmatch(value) else None


def _message(slug: str, data: dict[str, Any]) -> str:
    """The fixed message, and for ``invalid_input`` the field, reason and did-you-mean a
    reader needs without ``data``; never the refused value."""
    message = ERROR_CODES[slug][1]
    field = _named(data.get("field"))
    if slug != "invalid_input" or field is None:
        return message
    message = f"argument {field} is invalid"
    reason = _named(data.get("reason"))
    if reason is not None:
        message += f" ({reason})"
    suggestions = [c for c in data.get("candidates") or [] if _named(c)]
    if suggestions:
        message += f"; did you mean: {', '.join(suggestions)}"
    if _named(data.get("setting")) is not None:
        message += f"; the setting {data['setting']} admits it"
    return message


def _correlated(slug: str) -> dict[str, str]:
    """The request's id for an error's ``data``, and the log line that carries the same
    (the handler's context adds it to every line)."""
    ids = correlation.error_fields()
    log.info("answered %s", slug)
    return ids


def tool_error(slug: str, **data: Any) -> MCPError:
    """The top-level JSON-RPC error for ``slug`` with extra context in ``data``."""
    kept = {k: v for k, v in data.items() if v is not None}
    return MCPError(
        ERROR_CODES[slug][0], _message(slug, kept),
        {"code": slug, **kept, **_correlated(slug)})


def jsonrpc_error(slug: str, request_id: str | int | None, **data: Any) -> dict[str, Any]:
    """The same error as a JSON-RPC response body, for refusals made before the SDK runs."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": ERROR_CODES[slug][0],
            "message": _message(slug, data),
            "data": {"code": slug, **data, **_correlated(slug)},
        },
    }


def invalid_input(field: str, reason: str) -> MCPError:
    return tool_error("invalid_input", field=field, reason=reason)


def internal_error() -> MCPError:
    return tool_error("internal_error")


# Service-side field names that differ from the tool argument a client sent.
_FIELD_ALIASES = {"page_token": "cursor", "page_size": "limit"}


def _split(value: str | None) -> list[str]:
    return [item for item in (value or "").split(",") if item]


def _argument(field: str) -> str:
    """The tool argument a service-side field name stands for: the task context travels
    as flat arguments (``task_ref``, not ``context.task_ref``)."""
    field = field.removeprefix("context.")
    return _FIELD_ALIASES.get(field, field)


def _invalid(err: VeraError) -> dict[str, Any]:
    field = getattr(err, "field", None) or err.metadata.get("field") or ""
    data: dict[str, Any] = {"field": _argument(field) or None,
                            "reason": err.metadata.get("reason")}
    if "candidates" in err.metadata:  # did-you-mean, e.g. an unknown proposal predicate
        data["candidates"] = _split(err.metadata["candidates"])
    if "candidates_json" in err.metadata:  # an ambiguous entity or source: structured
        try:
            # Entity and source names are stored text: escaped like any result's.
            data["candidates"] = untrusted(json.loads(err.metadata["candidates_json"]))
        except ValueError:
            data["candidates"] = []
    return data


def _ambiguous(err: VeraError) -> dict[str, Any]:
    return {"candidates": _split(err.metadata.get("candidates"))}


def _unauthorized(err: VeraError) -> dict[str, Any]:
    return {"required_scope": err.metadata.get("required_scope")}


def _quota(err: VeraError) -> dict[str, Any]:
    return {"bucket": err.metadata.get("bucket")}


def _nothing(err: VeraError) -> dict[str, Any]:
    return {}


def _unavailable(err: VeraError) -> dict[str, Any]:
    # data.code is one of the GUIDE's nine, so a backing service (identity, knowledge,
    # retrieval, snapshot, the database) that could not be reached in time is an
    # internal_error; data.reason tells it apart from a bug: the same call may be retried.
    return {"reason": "unavailable"}


# The one table: ErrorInfo reason -> (data.code, extra data). Anything absent
# (NOT_FOUND, INTERNAL, unknown reasons) is redacted to a bare internal_error.
_REASON_TABLE = {
    "INVALID_INPUT": ("invalid_input", _invalid),
    "AMBIGUOUS_PROJECT": ("ambiguous_project", _ambiguous),
    "PROJECT_OUT_OF_SCOPE": ("project_out_of_scope", _nothing),
    "EXPIRED_CONTEXT_PACK": ("expired_context_pack", _nothing),
    "UNSUPPORTED_VERSION": ("unsupported_version", _nothing),
    "QUOTA_EXCEEDED": ("quota_exceeded", _quota),
    "UNAUTHORIZED": ("unauthorized", _unauthorized),
    "UNAUTHENTICATED": ("unauthenticated", _nothing),
    "UNAVAILABLE": ("internal_error", _unavailable),
}


def from_vera_error(err: VeraError) -> MCPError:
    entry = _REASON_TABLE.get(err.reason)
    if entry is None:
        return internal_error()
    slug, extract = entry
    return tool_error(slug, **extract(err))
