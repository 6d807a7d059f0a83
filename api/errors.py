"""VeraError -> HTTP status and a JSON body with the same stable codes as MCP."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from vera.errors import VeraError
from vera.observability import correlation

log = logging.getLogger(__name__)

HTTP_STATUS = {
    "INVALID_INPUT": 400,
    "UNAUTHENTICATED": 401,
    "UNAUTHORIZED": 403,
    "PROJECT_OUT_OF_SCOPE": 404,
    "NOT_FOUND": 404,
    "EXPIRED_CONTEXT_PACK": 404,
    "AMBIGUOUS_PROJECT": 409,
    "UNSUPPORTED_VERSION": 409,
    "QUOTA_EXCEEDED": 429,
    "UNAVAILABLE": 503,
}


def error_response(error: VeraError, status: int | None = None) -> JSONResponse:
    """``status`` overrides the reason's usual one where HTTP has a more exact answer to a
    refused request: a Host not served is 421, an Origin not allowed 403, a body that is
    not JSON 415, an oversize one 413, one not whole in time 408 (each still
    ``invalid_input`` naming the header or the body)."""
    status = status or HTTP_STATUS.get(error.reason, 500)
    body: dict[str, object] = {"code": error.reason.lower() if status != 500 else "internal_error"}
    if status != 500:
        body.update(error.metadata)
        body["message"] = error.message
    # The request's id, which the log line below carries too.
    body.update(correlation.error_fields())
    log.info("answered %s (%d)", body["code"], status)
    headers = {}
    if status == 429 and "retry_after_seconds" in error.metadata:
        headers["Retry-After"] = error.metadata["retry_after_seconds"]
    return JSONResponse({"error": body}, status_code=status, headers=headers)
