"""VeraError -> HTTP status and a JSON body with the same stable codes as MCP."""

from __future__ import annotations

from starlette.responses import JSONResponse

from vera.errors import VeraError

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


UNAVAILABLE_RETRY_AFTER_SECONDS = 2


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
    headers = {}
    if status == 429 and "retry_after_seconds" in error.metadata:
        headers["Retry-After"] = error.metadata["retry_after_seconds"]
    elif status == 503:
        # A service or the database is away (a restart heals it in seconds): nothing was
        # done, so a client may send the request again (vera.api_client does).
        headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    return JSONResponse({"error": body}, status_code=status, headers=headers)
