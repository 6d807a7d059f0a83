"""The one way a REST error leaves the API: ``{"error": {"code", "message", ...}}`` with
the same stable codes as MCP.

A route raises a ``vera.errors.VeraError`` (or lets one from a service propagate); a body,
query or path value its declared model refuses becomes ``invalid_input`` naming the field
(``records[3].subject``, ``trust_tier``; ``vera.fields``), never FastAPI's 422 shape; an
unknown path is ``not_found``, a method the path does not take is ``invalid_input`` naming
``method``; anything else is a bare ``internal_error``. ``install`` registers all of it on
the app.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from vera import fields
from vera.errors import InvalidInput, NotFound, QuotaExceeded, Unauthorized, VeraError
from vera.observability import correlation
from vera.rpc.refusals import AUTHORIZATION_REFUSED, QUOTA_REFUSED, RefusalTally

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
# Where a value of the request sits: pydantic's first location step, not part of its name.
_PLACES = frozenset({"body", "query", "path", "header", "cookie"})


class ErrorDetail(BaseModel):
    """``code`` is stable (``invalid_input``, ``unauthenticated``, ``unauthorized``,
    ``project_out_of_scope``, ``not_found``, ``quota_exceeded``, ``unavailable``,
    ``internal_error``, ...); ``field`` and ``reason`` name what an ``invalid_input``
    refused; other keys are the error's details, as text. ``message`` is for people."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str | None = None
    field: str | None = None
    reason: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


# Every route may answer these (the guard and the rate limits answer 408, 413, 415, 421
# and 429 before any route): declared once for the OpenAPI document.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "refused: `error.code` says why"},
    "5XX": {"model": ErrorBody, "description": "`unavailable` (a service), `internal_error`"},
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
    # The request's id, which the log line below carries too.
    body.update(correlation.error_fields())
    log.info("answered %s (%d)", body["code"], status)
    headers = {}
    if status == 429 and "retry_after_seconds" in error.metadata:
        headers["Retry-After"] = error.metadata["retry_after_seconds"]
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="vera-api"'
    elif status == 503:
        # A service or the database is away (a restart heals it in seconds): nothing was
        # done, so a client may send the request again (vera.api_client does).
        headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def invalid_input(refused: RequestValidationError) -> InvalidInput:
    """The first value the declared models refused, as ``invalid_input`` naming it."""
    error = fields.first_error(refused.errors())
    place, *location = error["loc"] or ("body",)
    if place not in _PLACES:  # a location without its place: the body's own
        place, location = "body", list(error["loc"])
    if error["type"] == "json_invalid":
        location = []
    document = refused.body if place == "body" else None
    name = fields.error_field(error, document, location) or str(place)
    return InvalidInput(name, error["msg"], reason=fields.reason(error))


def tally_refusal(refusals: RefusalTally, error: VeraError) -> None:
    """Counts an authorization or quota refusal for the audit trail (vera.rpc.refusals)."""
    if isinstance(error, Unauthorized):
        refusals.count(AUTHORIZATION_REFUSED, "unauthorized")
    elif isinstance(error, QuotaExceeded):
        refusals.count(QUOTA_REFUSED, str(error.metadata.get("bucket", "quota")))


async def _vera_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, VeraError)
    tally_refusal(request.app.state.refusals, error)
    return error_response(error)


async def _validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    return error_response(invalid_input(error))


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        return error_response(NotFound("no such route"))
    if error.status_code == 405:
        refused = error_response(InvalidInput("method", reason="not_allowed"), 405)
        refused.headers.update(error.headers or {})
        return refused
    return error_response(InvalidInput("request", str(error.detail)), error.status_code)


async def _internal_error(request: Request, error: Exception) -> Response:
    # The server logs the exception itself (Starlette re-raises it after this answer).
    return error_response(VeraError())


def install(app: FastAPI) -> None:
    app.add_exception_handler(VeraError, _vera_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
