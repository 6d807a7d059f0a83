"""The one way a VERA gRPC server is built, run and stopped.

Every server gets the domain-error interceptor, the standard health service and
reflection; ``create_server`` binds (port 0 in tests) and returns the bound port.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from vera.errors import VeraError
from vera.rpc.errors import to_rpc_status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceBinding:
    """A servicer and the generated function that registers it."""

    full_name: str  # e.g. "vera.knowledge.v1.KnowledgeService"
    servicer: Any
    register: Callable[[Any, grpc.aio.Server], None]

from vera.rpc.request_text import check_request_text

class DomainErrorInterceptor(grpc.aio.ServerInterceptor):
    """Turns VeraError into a status with one ErrorInfo; anything else into a bare INTERNAL."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        method = handler_call_details.method

        async def guarded(request, context):
            try:
                return await inner(request, context)
            except VeraError as exc:
                await context.abort_with_status(to_rpc_status(exc))
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except Exception:
                log.exception("unhandled error in %s", method)
                await context.abort_with_status(to_rpc_status(VeraError("internal error")))

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
                check_request_text(request)
        )


@dataclass
class RunningServer:
    """A bound (not yet started) server with its health servicer."""

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    service_names: tuple[str, ...]

    async def stop(self, grace: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


def create_server(bindings: Sequence[ServiceBinding], address: str) -> RunningServer:
    """Builds a server for the bindings and binds it; call ``await server.start()``."""
    server = grpc.aio.server(interceptors=[DomainErrorInterceptor()])
    names = tuple(binding.full_name for binding in bindings)
    for binding in bindings:
        binding.register(binding.servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME),
        server,
    )
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"could not bind gRPC server to {address}")
    return RunningServer(server, port, health_servicer, names)


async def mark_serving(running: RunningServer) -> None:
    for name in ("", *running.service_names):
        await running.health.set(name, health_pb2.HealthCheckResponse.SERVING)


async def serve_until_signalled(
    running: RunningServer, on_stop: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Starts the server, reports SERVING, and stops gracefully on SIGINT/SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await running.server.start()
    await mark_serving(running)
    log.info("serving %s on port %d", ", ".join(running.service_names), running.port)
    await stop.wait()
    log.info("stopping %s", ", ".join(running.service_names))
    await running.stop()
    if on_stop is not None:
        await on_stop()


@dataclass
class HostedService:
    """What every ``services/<svc>/server.py:create(settings, address)`` returns.

    ``aclose`` releases what the service owns (pools, background tasks, indexes)
    after the server has stopped.
    """

    running: RunningServer
    aclose: Callable[[], Awaitable[None]]
