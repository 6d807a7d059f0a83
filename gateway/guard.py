"""The one boundary every tool call passes: authorize class -> bounds -> quota -> body.

A refused or invalid call is stopped before the quota is charged, so it uses none. The
whole call, downstream RPCs included, runs within one budget (``gateway.budget``).
Every failure leaves as ``MCPError`` with the seed's integer code and ``data.code``;
service errors are mapped in ``errors``; anything unexpected becomes ``internal_error``
with no internal text (the SDK would otherwise turn it into an ``isError`` result).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from starlette.requests import Request

from vera.config import Settings
from vera.errors import VeraError
from vera.gateway.auth import Authenticator, scope_names
from vera.gateway.bounds import BoundsError
from vera.gateway.budget import budgeted
from vera.gateway.call_context import CallContext, Handler
from vera.gateway.errors import from_vera_error, internal_error, invalid_input, tool_error
from vera.gateway.idempotency import requested_key, run_once
from vera.gateway.metrics import ToolMetrics
from vera.gateway.project_cache import ProjectCache
from vera.gateway.render import render
from vera.gateway.spec import ToolSpec
from vera.quota import QuotaPolicy
from vera.rpc.backends import Backends
from vera.rpc.refusals import AUTHORIZATION_REFUSED, QUOTA_REFUSED, RefusalTally
from vera.text import untrusted

log = logging.getLogger(__name__)

# Where the HTTP boundary leaves the event-loop time the request arrived (request.state).
RECEIVED_AT_STATE_KEY = "vera_received_at"


def _deadline(request: Request | None, budget_seconds: float) -> float:
    """The event-loop time the call's budget ends, counted from the request's arrival."""
    received = getattr(request.state, RECEIVED_AT_STATE_KEY, None) if request else None
    if not isinstance(received, float):
        received = asyncio.get_running_loop().time()
    return received + budget_seconds


class Guard:
    def __init__(
        self,
        *,
        settings: Settings,
        tools: tuple[ToolSpec, ...],
        handlers: Mapping[str, Handler],
        authenticator: Authenticator,
        quota: QuotaPolicy,
        metrics: ToolMetrics,
        backends: Callable[[], Backends],
        refusals: RefusalTally,
    ) -> None:
        self._settings = settings
        self._refusals = refusals
        self._specs = tools
        self._tools = {spec.name: spec for spec in tools}
        self._handlers = handlers
        self._authenticator = authenticator
        self._quota = quota
        self._metrics = metrics
        self._backends = backends
        self._scope_names = scope_names(settings)
        self._projects = ProjectCache(settings.mcp.project_cache_seconds)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        request: Request | None = None,
        protocol_version: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        spec = self._tools.get(name)
        if spec is None:
            # Unknown and hidden tools read the same, and never become a metrics label.
            raise invalid_input("name", "unknown_tool")
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await self._guarded(
                spec, dict(arguments or {}), request, protocol_version, meta
            )
            outcome = "success"
            self._metrics.observe_answer(spec.name, result.structured_content)
            return result
        finally:
            self._metrics.observe(spec.name, outcome, time.perf_counter() - started)

    async def _guarded(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        request: Request | None,
        protocol_version: str | None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        deadline = _deadline(request, self._settings.mcp.request_budget_seconds)
        try:
            async with asyncio.timeout_at(deadline):
                return await self._run(spec, arguments, request, protocol_version, meta, deadline)
        except MCPError:
            raise
        except BoundsError as exc:
            raise invalid_input(exc.field, exc.reason) from None
        except VeraError as exc:
            log.info("tool %s: service refused with %s", spec.name, exc.reason)
            raise from_vera_error(exc) from None
        except TimeoutError:
            log.warning("tool %s: the request budget ran out", spec.name)
            raise internal_error() from None
        except Exception:
            log.exception("tool %s failed unexpectedly", spec.name)
            raise internal_error() from None

    async def _run(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        request: Request | None,
        protocol_version: str | None,
        meta: Mapping[str, Any] | None,
        deadline: float,
    ) -> types.CallToolResult:
        loop = asyncio.get_running_loop()
        backends = budgeted(self._backends(), self._settings.rpc, deadline, loop.time)
        caller = await self._authenticator.authenticate(request, backends)
        required = spec.required_class(arguments)
        if required not in caller.granted:
            self._refusals.count(AUTHORIZATION_REFUSED, "insufficient_scope")
            raise tool_error("unauthorized", required_scope=self._scope_names[required])
        try:
            args = spec.arguments.validate(arguments)
            key = requested_key(request, meta) if spec.accepts_idempotency_key else None
        except BoundsError as exc:
            raise invalid_input(exc.field, exc.reason) from None
        refusal = await self._quota.charge(caller.principal_id, spec.bucket)
        if refusal is not None:
            self._metrics.observe_refusal(refusal.bucket)
            self._refusals.count(QUOTA_REFUSED, refusal.bucket)
            raise tool_error(
                "quota_exceeded",
                bucket=refusal.bucket,
                retry_after_seconds=refusal.retry_after_seconds,
            )
        ctx = CallContext(
            caller=caller,
            backends=backends,
            settings=self._settings,
            protocol_version=protocol_version,
            visible_tools=self.tool_names,
            projects=self._projects,
        )
        handler = self._handlers[spec.name]
        if key is None:
            data = await handler(ctx, args)
        else:
            data = await run_once(
                backends.snapshot,
                caller.principal_id,
                key,
                spec,
                args,
                lambda: handler(ctx, args),
                recorder=self._backends().snapshot,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=render(spec, data))],
            structured_content=untrusted(data),
        )
