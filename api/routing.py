"""How a REST route is declared: once, as a typed FastAPI endpoint on a router from
``new_router``, whose models are the request's validation and the OpenAPI document.

    router = new_router("/curation/projects/{project}", tags=["curation"])

    class RejectBody(RequestBody):
        reason: Annotated[str, Field(min_length=1, max_length=2048)]

    @router.post("/proposals/{fact_key}/reject")
    async def reject(body: RejectBody, fact_key: FactKey, project: CuratedProject,
                     caller: Caller, services: Services) -> RejectResult:
        ...

- A body is a ``RequestBody``: an unknown field is refused, nothing is coerced (``"1"`` is
  no number). Query parameters come as one model (``Page``); path values are annotated
  with their bounds. What a model refuses is ``invalid_input`` naming the field
  (``vera.api.errors``).
- ``Caller`` is the authenticated principal. It is an ``Admission``: answered from the
  request's headers before FastAPI reads the body, so an unauthenticated request is 401
  whatever it carries, and a closed registration 403 even for a body that is not JSON.
- A refusal is a raised ``vera.errors.VeraError``; the answer is the declared response
  model, returned.

The guard and the rate limits (``vera.api.requests``, ``vera.api.rate_limits``) run before
any of this, as middleware.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Annotated, Any, Generic, TypeVar

from fastapi import APIRouter, Depends, Query, Security
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from vera.api.auth import RestCaller
from vera.api.errors import ERROR_RESPONSES
from vera.config import Settings
from vera.rpc.backends import Backends

INT32_MAX = 2**31 - 1
PAGE_TOKEN_MAX = 4096

T = TypeVar("T")


class RequestBody(BaseModel):
    """Every JSON body: its fields and nothing else, each of its declared type."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ResponseBody(BaseModel):
    """Every JSON answer."""


class Admission(Generic[T]):
    """A dependency answered from the request's headers alone, before its body is read
    (``VeraRoute``), once per request."""

    def __init__(self, admit: Callable[[Request], Awaitable[T]]) -> None:
        self._admit = admit

    async def __call__(self, request: Request) -> T:
        admitted: dict[Admission[Any], Any] = request.scope.setdefault("vera.admitted", {})
        if self not in admitted:
            admitted[self] = await self._admit(request)
        return admitted[self]


class BearerAdmission(Admission[T]):
    """An ``Admission`` by ``Authorization: Bearer``, declared as such in the document."""

    async def __call__(
        self,
        request: Request,
        _credential: Annotated[HTTPAuthorizationCredentials | None, Security(
            HTTPBearer(auto_error=False, scheme_name="bearer",
                       description="a VERA API key; in local mode the data dir's secret")
        )] = None,
    ) -> T:
        return await super().__call__(request)


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    for child in dependant.dependencies:
        yield child
        yield from _dependants(child)


class VeraRoute(APIRoute):
    """A declared route whose admissions run before FastAPI reads and validates the body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        admissions = list(dict.fromkeys(
            d.call for d in _dependants(self.dependant) if isinstance(d.call, Admission)))
        if not admissions:
            return handler

        async def admitted_first(request: Request) -> Response:
            for admission in admissions:
                await admission(request)
            return await handler(request)

        return admitted_first


def new_router(prefix: str = "", *, tags: list[str] | None = None) -> APIRouter:
    """A router of declared routes: every one documents VERA's error answers."""
    return APIRouter(prefix=prefix, tags=list(tags or []), route_class=VeraRoute,
                     responses=ERROR_RESPONSES)


async def _authenticate(request: Request) -> RestCaller:
    return await request.app.state.authenticator.authenticate(request, request.app.state.backends)


authenticated: BearerAdmission[RestCaller] = BearerAdmission(_authenticate)


def _backends(request: Request) -> Backends:
    return request.app.state.backends


def _settings(request: Request) -> Settings:
    return request.app.state.settings


Caller = Annotated[RestCaller, Depends(authenticated)]
Services = Annotated[Backends, Depends(_backends)]
AppSettings = Annotated[Settings, Depends(_settings)]


class PageQuery(BaseModel):
    """A list route's page: ``page_size`` 0 is the service's default."""

    page_size: Annotated[int, Field(ge=0, le=INT32_MAX)] = 0
    page_token: Annotated[str, Field(max_length=PAGE_TOKEN_MAX)] = ""


Page = Annotated[PageQuery, Query()]
