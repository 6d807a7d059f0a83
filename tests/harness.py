"""The one home of the runners tests share: an ASGI app under uvicorn on a loopback port
(the MCP gateway, a stand-in IdP), a real knowledge service on the test database, a gRPC
stand-in for identity, the gateway over those two, and a stranger holding a port.

Importable from every test module as ``harness`` (``tests/`` is on the path through its
conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import re
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import uvicorn
from mcp import Client

from vera.config import (
    DatabaseSettings,
    McpSettings,
    ObservabilitySettings,
    ServiceAddresses,
    Settings,
)
from vera.gateway.app import build_app
from vera.identity.v1 import identity_pb2_grpc
from vera.knowledge.v1 import knowledge_service_pb2_grpc as knowledge_pb2_grpc
from vera.local_secret import local_token_key
from vera.mcp_tokens import LOCAL_KEY_ID, TokenKey, mint
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.services.knowledge import server as knowledge_server
from vera.stack.launcher import EVERY_SCOPE, bearer_mcp_client

RPC_DEADLINE_SECONDS = 10.0
# The data dir's secret a local-dev REST API asks for (vera.local_secret); `vera up` makes
# one per data dir, tests that build the API themselves configure this one.
LOCAL_SECRET = "local-secret-of-the-test-data-dir-0123456789abcdef"
# What `vera up` would give a local-dev gateway for that data dir (never the secret itself);
# every gateway a test builds in process verifies local tokens with it.
LOCAL_TOKEN_KEY = local_token_key(LOCAL_SECRET)


def local_token(
    *, key: str = LOCAL_TOKEN_KEY, principal_id: str | None = None,
    scopes: tuple[str, ...] = EVERY_SCOPE, lifetime_seconds: int = 86400,
) -> str:
    """A local MCP token, as the local REST API mints for the data dir's secret (acting as
    the local principal unless ``principal_id`` names another)."""
    principal = principal_id or str(McpSettings().local_principal_id)
    return mint(TokenKey.local(key), principal, scopes, key_id=LOCAL_KEY_ID,
                lifetime_seconds=lifetime_seconds).token


def mcp_client(url: str, token: str | None = None, **options: Any) -> Client:
    """The official MCP client over HTTP presenting ``token`` (by default a local token for
    a gateway a test built in process; a ``vera up`` stack's own: ``LaunchedStack.mcp_client``)."""
    return bearer_mcp_client(url, token or local_token(), **options)


class _BearerProxy(BaseHTTPRequestHandler):
    """Forwards each request as it came with the proxy's bearer token added. Host and
    Origin pass too, the proxy's own address in them becoming the target's, so the target's
    checks judge what the client sent."""

    target = ""
    token = ""
    HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                            "authorization"})

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        own = f"127.0.0.1:{self.server.server_address[1]}"
        target = urlsplit(self.target).netloc
        headers = {
            k: v.replace(own, target) if k.lower() in ("host", "origin") else v
            for k, v in self.headers.items() if k.lower() not in self.HOP_BY_HOP
        }
        with httpx.Client(timeout=60) as http:
            answer = http.request(self.command, f"{self.target}{self.path}", content=body,
                                  headers={**headers, "authorization": f"Bearer {self.token}"})
        self.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in self.HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("content-length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    do_GET = do_POST = do_DELETE = _forward

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def bearer_proxy(target: str, token: str) -> Iterator[str]:
    """An HTTP proxy on a loopback port that adds ``token`` to every request it forwards to
    ``target`` (a base URL): for a client that cannot send a header itself (the MCP
    conformance suite). Yields the proxy's base URL."""
    handler = type("Proxy", (_BearerProxy,), {"target": target.rstrip("/"), "token": token})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.asynccontextmanager
async def serve_app(app: Any, *, lifespan: Literal["on", "off"] = "on") -> AsyncIterator[str]:
    """Runs ``app`` under uvicorn on 127.0.0.1, port 0, inside the test loop; yields its
    base URL and stops it when the block ends."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan=lifespan,
        log_level="warning",
        ws="none",
        http="h11",
        log_config=None,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def serve_mcp(app: Any) -> AsyncIterator[str]:
    """``serve_app`` for a gateway app; yields its MCP endpoint URL."""
    async with serve_app(app) as base:
        yield f"{base}/mcp"


def knowledge_settings(dsn: str, *, pool_max_size: int = 4, **fields: Any) -> Settings:
    """Settings for a knowledge service on the test database (a small pool)."""
    database = DatabaseSettings(dsn=dsn, pool_min_size=1, pool_max_size=pool_max_size)
    return Settings(database=database, **fields)


@contextlib.asynccontextmanager
async def serve_service(module: Any, settings: Settings, **create: Any) -> AsyncIterator[str]:
    """A service (its ``server`` module's ``create``) on a loopback port; yields its address
    and stops it when the block ends."""
    hosted = await module.create(settings, "127.0.0.1:0", **create)
    try:
        await hosted.running.server.start()
        try:
            yield f"127.0.0.1:{hosted.running.port}"
        finally:
            await hosted.running.stop(0)
    finally:
        await hosted.aclose()


def knowledge_address(settings: Settings) -> contextlib.AbstractAsyncContextManager[str]:
    """A real knowledge service on a loopback port; yields its address."""
    return serve_service(knowledge_server, settings)


@contextlib.asynccontextmanager
async def knowledge_stub(
    settings: Settings,
) -> AsyncIterator[knowledge_pb2_grpc.KnowledgeServiceStub]:
    """A real knowledge service; yields a stub on a channel to it."""
    async with knowledge_address(settings) as address:
        channel = open_channel(address, RPC_DEADLINE_SECONDS)
        try:
            yield knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        finally:
            await channel.close()


@contextlib.asynccontextmanager
async def identity_stand_in(
    servicer: identity_pb2_grpc.IdentityServiceServicer,
) -> AsyncIterator[str]:
    """``servicer`` served as the identity service on a loopback port; yields its address."""
    server = create_server(
        [
            ServiceBinding(
                "vera.identity.v1.IdentityService",
                servicer,
                identity_pb2_grpc.add_IdentityServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    await server.server.start()
    await mark_serving(server)
    try:
        yield f"127.0.0.1:{server.port}"
    finally:
        await server.stop(0)


@contextlib.asynccontextmanager
async def gateway_over_knowledge(
    dsn: str,
    identity: identity_pb2_grpc.IdentityServiceServicer,
    *,
    tool_profile: str,
    pool_max_size: int = 2,
    knowledge_fields: dict[str, Any] | None = None,
) -> AsyncIterator[tuple[str, knowledge_pb2_grpc.KnowledgeServiceStub]]:
    """The gateway (local-dev, quotas off) over a real knowledge service (its
    ``KnowledgeSettings`` fields from ``knowledge_fields``) and the identity stand-in
    ``identity``, which also answers for retrieval and snapshot; yields the MCP URL and a
    stub on the knowledge service."""
    service = knowledge_settings(dsn, pool_max_size=pool_max_size,
                                 knowledge=knowledge_fields or {})
    async with identity_stand_in(identity) as stand_in, knowledge_address(service) as knowledge:
        settings = Settings(
            environment="local",
            mcp=McpSettings(
                local_token_key=LOCAL_TOKEN_KEY,
                port=0,
                tool_profile=tool_profile,
                quota_enabled=False,
            ),
            services=ServiceAddresses(
                identity=stand_in, knowledge=knowledge, retrieval=stand_in, snapshot=stand_in
            ),
            observability=ObservabilitySettings(mcp_metrics_enabled=False),
        )
        channel = open_channel(knowledge, RPC_DEADLINE_SECONDS)
        try:
            async with serve_mcp(build_app(settings)) as url:
                yield url, knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        finally:
            await channel.close()


class _AnswersOk(BaseHTTPRequestHandler):
    """Any path, 200: a readiness probe of VERA's would count it."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def port_held(port: int, *, answering: bool) -> Iterator[None]:
    """Another process's listener on 127.0.0.1:``port`` (in this one, to the code under
    test): a bare socket, or with ``answering`` an HTTP server that answers every GET 200."""
    if not answering:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen()
            yield
        return
    server = ThreadingHTTPServer(("127.0.0.1", port), _AnswersOk)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


class _AllIndexed(retrieval_pb2_grpc.RetrievalServiceServicer):
    """Retrieval's index status only, reporting everything indexed."""

    async def GetIndexStatus(self, request: Any, context: Any) -> Any:
        return retrieval_pb2.GetIndexStatusResponse(indexed_position=2**62, head_position=0)


@contextlib.asynccontextmanager
async def local_api_stack(pg_dsn: str, data_dir: Path) -> AsyncIterator[Path]:
    """The data dir of a (partly stand-in) running local-dev stack, as `vera ingest
    --data-dir` and `vera harvest --data-dir` find one: its secret and its stack.json,
    naming the real REST API over real identity and knowledge services; retrieval is a
    stand-in that reports everything indexed (the commands wait for indexing)."""
    import json
    import os

    from vera.api.app import build_app as build_api
    from vera.config import ApiSettings
    from vera.local_secret import ensure_secret
    from vera.services.identity import server as identity_server

    service_settings = Settings(database=DatabaseSettings(dsn=pg_dsn, pool_max_size=4))
    retrieval = create_server(
        [ServiceBinding("vera.retrieval.v1.RetrievalService", _AllIndexed(),
                        retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server)],
        "127.0.0.1:0",
    )
    async with (
        serve_service(identity_server, service_settings) as identity,
        serve_service(knowledge_server, service_settings) as knowledge,
    ):
        await retrieval.server.start()
        await mark_serving(retrieval)
        stand_in = f"127.0.0.1:{retrieval.port}"
        api = build_api(Settings(
            environment="local", api=ApiSettings(local_secret=ensure_secret(data_dir)),
            services=ServiceAddresses(identity=identity, knowledge=knowledge,
                                      retrieval=stand_in, snapshot=stand_in)))
        try:
            async with serve_app(api) as url:
                (data_dir / "run").mkdir()
                (data_dir / "run" / "stack.json").write_text(
                    json.dumps({"pid": os.getpid(), "api_url": url}))
                yield data_dir
        finally:
            await retrieval.stop(0)


@dataclass
class ExportedSpan:
    service: str  # the exporting process's service.name
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    attributes: dict[str, Any]


class OtlpReceiver:
    """A loopback OTLP/HTTP trace receiver: what every process of a stack exports, kept as
    the raw request bodies (for content scans) and decoded with opentelemetry-proto."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._lock:
                    receiver.bodies.append(body)
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def env(self) -> dict[str, str]:
        """The standard variables that send a process's every span here, at once."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_TRACES_SAMPLER": "parentbased_always_on",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }

    def spans(self) -> list[ExportedSpan]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        with self._lock:
            bodies = list(self.bodies)
        found = []
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value
                            for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(ExportedSpan(
                            service=resource.get("service.name", ""),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=span.kind,
                            attributes={a.key: _any_value(a.value) for a in span.attributes},
                        ))
        return found


def _any_value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


def without_ids(data: dict[str, Any]) -> dict[str, Any]:
    """An error's ``data`` without its correlation id (a trace or request id, different on
    every call; tests/gateway/test_correlation.py checks it), for equality checks."""
    return {k: v for k, v in data.items() if k not in ("trace_id", "request_id")}


def chart_metric_names() -> set[str]:
    """Every vera_* series the chart's alert rules and dashboards name (its files, as
    written), for the check that a running stack exports each of them."""
    files = Path(__file__).resolve().parent.parent / "charts" / "vera" / "files"
    text = "".join(p.read_text() for p in sorted(files.rglob("*")) if p.is_file())
    return set(re.findall(r"\bvera_[a-z0-9_]+", text))
