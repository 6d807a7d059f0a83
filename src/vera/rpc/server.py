"""The one way a VERA gRPC server is built, run and stopped.

Every server gets the internal-auth interceptor (with the deployment's key), a gate that
drains in-flight calls on stop, the domain-error interceptor and the standard health
service; reflection only when configured. ``create_server`` binds (port 0 in tests) and
returns the bound port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from vera.config import RpcSettings, Settings
from vera.db.pool import STATEMENT_TIMEOUTS, database_unreachable
from vera.errors import Unavailable, VeraError
from vera.observability import tracing
from vera.observability.service_metrics import ServiceMetrics
from vera.rpc.auth import (
    EXEMPT_PREFIX,
    AssertionVerifier,
    InternalAuthInterceptor,
    server_auth_key,
)
from vera.rpc.errors import to_rpc_status
from vera.rpc.request_text import check_request_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceBinding:
    """A servicer and the generated function that registers it."""

    full_name: str  # e.g. "vera.knowledge.v1.KnowledgeService"
    servicer: Any
    register: Callable[[Any, grpc.aio.Server], None]


class DomainErrorInterceptor(grpc.aio.ServerInterceptor):
    """Turns VeraError into a status with one ErrorInfo; a statement that ran past its
    timeout, or found the database unreachable, into UNAVAILABLE; anything else into a
    bare INTERNAL."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        method = handler_call_details.method

        async def guarded(request, context):
            try:
                check_request_text(request)
                return await inner(request, context)
            except VeraError as exc:
                await context.abort_with_status(to_rpc_status(exc))
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except STATEMENT_TIMEOUTS:
                await context.abort_with_status(
                    to_rpc_status(Unavailable("the database did not answer in time",
                                              reason="timeout")))
            except Exception as exc:
                if database_unreachable(exc):
                    log.warning("the database is unreachable (%s) in %s",
                                type(exc).__name__, method)
                    await context.abort_with_status(
                        to_rpc_status(Unavailable("the database cannot be reached",
                                                  reason="database_unreachable")))
                # Type and stack only: messages may quote ids, queries or row values.
                log.error("unhandled %s in %s\n%s", type(exc).__name__, method,
                          "".join(traceback.format_tb(exc.__traceback__)).rstrip())
                await context.abort_with_status(to_rpc_status(VeraError("internal error")))

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class CallGate(grpc.aio.ServerInterceptor):
    """Counts in-flight calls; once closed, refuses new ones (health excepted) with
    UNAVAILABLE so a stopping server finishes what it accepted and takes nothing more."""

    def __init__(self) -> None:
        self._active = 0
        self._closed = False
        self._idle = asyncio.Event()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if (handler is None or handler.unary_unary is None
                or handler_call_details.method.startswith(EXEMPT_PREFIX)):
            return handler
        inner = handler.unary_unary

        async def counted(request, context):
            if self._closed:
                await context.abort_with_status(
                    to_rpc_status(Unavailable("the service is stopping")))
            self._active += 1
            try:
                return await inner(request, context)
            finally:
                self._active -= 1
                if self._closed and self._active == 0:
                    self._idle.set()

        return handler._replace(unary_unary=counted)

    async def drain(self, grace: float) -> None:
        """Closes the gate and waits up to ``grace`` seconds for in-flight calls."""
        self._closed = True
        if self._active:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), grace)


def _outcome(context: Any, raised: BaseException | None) -> grpc.StatusCode:
    """The status a finished call ends with: the one it was aborted with or set, else OK;
    cancelled when it was, unknown when it raised past every interceptor."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(raised, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    if raised is not None and not isinstance(raised, grpc.aio.AbortError):
        return grpc.StatusCode.UNKNOWN
    return grpc.StatusCode.OK


class CallOutcome(grpc.aio.ServerInterceptor):
    """Records how every call of a registered method (health excepted) ended: its gRPC
    status on the server span (the instrumentation cannot see ``abort_with_status``), and
    its method, status and duration in the service's metrics."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self._metrics = metrics

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if (handler is None or handler.unary_unary is None
                or handler_call_details.method.startswith(EXEMPT_PREFIX)):
            return handler
        inner = handler.unary_unary
        method = handler_call_details.method

        async def recorded(request, context):
            started = time.perf_counter()
            raised: BaseException | None = None
            try:
                return await inner(request, context)
            except BaseException as exc:
                raised = exc
                raise
            finally:
                code = _outcome(context, raised)
                tracing.mark_rpc_status(code.value[0], code.name)
                self._metrics.observe(method, code.name, time.perf_counter() - started)

        return handler._replace(unary_unary=recorded)


@dataclass
class RunningServer:
    """A bound (not yet started) server with its health servicer."""

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    service_names: tuple[str, ...]
    gate: CallGate
    # What the service's listener serves (vera serve starts it); a service adds its gauges.
    metrics: ServiceMetrics

    async def stop(self, grace: float) -> None:
        """Health turns NOT_SERVING, new calls are refused while calls in flight get up
        to ``grace`` seconds to finish (health keeps answering), then the server closes."""
        await self.health.enter_graceful_shutdown()
        await self.gate.drain(grace)
        await self.server.stop(0)


# A client learns of replicas only when it resolves its target again, which gRPC does when
# a connection ends: ending each one after a while lets callers find a scaled-out or rolled
# replica (the chart's headless Services). The grace covers the longest call in flight.
MAX_CONNECTION_AGE_SECONDS = 300
MAX_CONNECTION_AGE_GRACE_SECONDS = 60
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    # gRPC shares a port with SO_REUSEPORT by default, so a second server on it binds and
    # gets half the calls; without it a taken port fails the bind, as everywhere else.
    ("grpc.so_reuseport", 0),
    ("grpc.max_connection_age_ms", MAX_CONNECTION_AGE_SECONDS * 1000),
    ("grpc.max_connection_age_grace_ms", MAX_CONNECTION_AGE_GRACE_SECONDS * 1000),
)


def create_server(
    bindings: Sequence[ServiceBinding],
    address: str,
    settings: Settings | None = None,
) -> RunningServer:
    """Builds a server for the bindings and binds it; call ``await server.start()``.

    Without ``settings`` (in-process fakes in tests) it follows the local rules: no key,
    so loopback only, and no reflection. A service that may not run without the internal
    key raises ConfigError naming VERA_RPC__AUTH_KEY.
    """
    rpc = settings.rpc if settings is not None else RpcSettings()
    environment = settings.environment if settings is not None else "local"
    key = server_auth_key(rpc.auth_key, environment, address)
    gate = CallGate()
    interceptors: list[grpc.aio.ServerInterceptor] = [gate, DomainErrorInterceptor()]
    if key is not None:
        interceptors.insert(0, InternalAuthInterceptor(AssertionVerifier(rpc.accepted_keys)))
    # Outermost: the server span (tracing on), then the outcome of everything inside it,
    # refusals of the internal assertion and of a stopping server included.
    metrics = ServiceMetrics()
    interceptors[:0] = [*tracing.grpc_server_interceptors(), CallOutcome(metrics)]
    server = grpc.aio.server(interceptors=interceptors, options=SERVER_OPTIONS)
    names = tuple(binding.full_name for binding in bindings)
    for binding in bindings:
        binding.register(binding.servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if rpc.reflection:
        reflection.enable_server_reflection(
            (*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
             reflection.SERVICE_NAME),
            server,
        )
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"could not bind gRPC server to {address}")
    return RunningServer(server, port, health_servicer, names, gate, metrics)


async def mark_serving(running: RunningServer) -> None:
    for name in ("", *running.service_names):
        await running.health.set(name, health_pb2.HealthCheckResponse.SERVING)


async def serve_until_signalled(
    running: RunningServer,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    *,
    grace: float,
) -> None:
    """Starts the server, reports SERVING, and on SIGINT/SIGTERM drains calls in flight
    for up to ``grace`` seconds before stopping; ``on_stop`` runs however this ends."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await running.server.start()
        await mark_serving(running)
        log.info("serving %s on port %d", ", ".join(running.service_names), running.port)
        await stop.wait()
        log.info("stopping %s", ", ".join(running.service_names))
        await running.stop(grace)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await running.server.stop(0)  # nothing left after a drain; closes a cancelled run
        if on_stop is not None:
            await on_stop()


@dataclass
class HostedService:
    """What every ``services/<svc>/server.py:create(settings, address)`` returns.

    ``aclose`` releases what the service owns (pools, background tasks, indexes)
    after the server has stopped: the ``vera.resource_stack.ResourceStack`` its ``create``
    built on.
    """

    running: RunningServer
    aclose: Callable[[], Awaitable[None]]
