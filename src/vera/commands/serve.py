"""`vera serve <service>`: one gRPC service alone, until signalled."""

from __future__ import annotations

import argparse
import asyncio
import importlib

from vera.commands import SERVICE_NAMES, Subcommands
from vera.config import load_settings


def add_parser(commands: Subcommands) -> None:
    serve = commands.add_parser("serve", help="run one gRPC service alone")
    serve.add_argument("service", choices=SERVICE_NAMES)
    serve.add_argument("--address", help="HOST:PORT to bind (default: VERA_SERVICES__<SVC>)")


def main(args: argparse.Namespace) -> int:
    from vera.observability import tracing
    from vera.observability.metrics_listener import start_listener
    from vera.rpc.server import serve_until_signalled

    settings = load_settings()
    # Before the pool opens: every statement the service runs is a span (tracing on).
    if tracing.configure_tracing(args.service):
        tracing.instrument_database()
    address = args.address or getattr(settings.services, args.service)
    module = importlib.import_module(f"vera.services.{args.service}.server")

    async def serve() -> None:
        hosted = await module.create(settings, address)
        obs = settings.observability
        listener = None
        if obs.service_metrics_port is not None:
            listener = start_listener(
                hosted.running.metrics.registry, obs.service_metrics_host,
                obs.service_metrics_port)

        async def stop() -> None:
            await hosted.aclose()
            if listener is not None:
                await listener.stop()

        await serve_until_signalled(
            hosted.running, stop, grace=settings.rpc.longest_deadline_seconds)

    asyncio.run(serve())
    return 0
