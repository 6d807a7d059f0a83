"""The MCP gateway's own cost per ``tools/call``, with the services taken out.

    scripts/bench gateway-overhead [--calls N] [--rounds N]

The real gateway app (``vera.gateway.app.build_app``: transport security, the SDK's
stateless streamable-HTTP manager with JSON responses, the low-level ``Server``, the
guard with auth, bounds, quota and metrics, the handler's protobuf -> JSON views and the
text rendering) runs with in-memory fakes in place of the gRPC stubs. The fakes answer at
once with prebuilt messages shaped like a LoCoMo answer (10 results, each with a citation
and the retrieval signals), so what is left is the gateway, the HTTP server and the
client. ``knowledge_get_context`` and ``knowledge_search`` are timed in both protocol
eras the official client speaks: 2026-07-28 (``mcp.Client``'s default ``auto`` mode
negotiates it with ``server/discover``; the SDK serves it in ``handle_modern_request``)
and 2025-11-25 (``mode="legacy"``: the ``initialize`` handshake; the SDK serves each
stateless call through a fresh transport, task and memory streams). Each variant strips
one more layer:

    mcp.Client <era>       the official client against the gateway under uvicorn in its
                           own process, run as ``vera.entrypoints.mcp.main`` runs it
    httpx <era>            the same JSON-RPC body the client sends, posted with httpx:
                           the client's MCP layer (models, session, its validation of
                           ``structuredContent`` against the output schema) taken out
    raw socket <era>       the same bytes over one keep-alive socket: uvicorn and the app
    ASGI <era>             the app called in process, no socket and no HTTP server:
                           Starlette, the SDK's transport and dispatch, guard and handler
    guard.call             the guard alone (auth, bounds, quota, handler, rendering,
                           metrics), no MCP SDK
    handler + render       the tool body (protobuf -> JSON views) and the text rendering

Variants run interleaved, round after round, so a noisy machine slows all alike. Figures
are wall times of one call in milliseconds; the split below each table is the difference
of neighbouring p50s, a rough attribution rather than a measurement of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import httpx
import uvicorn
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from starlette.applications import Starlette

from bench import record
from bench.metrics import percentile
from vera.config import McpSettings, ObservabilitySettings, Settings
from vera.gateway.app import build_app
from vera.gateway.auth import AuthClass, Caller
from vera.gateway.call_context import CallContext
from vera.gateway.coding_tools import CODING_TOOLS
from vera.gateway.guard import Guard
from vera.gateway.metrics import ToolMetrics
from vera.gateway.profiles import handlers_for_profile, tools_for_profile
from vera.gateway.project_cache import ProjectCache
from vera.gateway.quota import limits_from_settings
from vera.gateway.render import render
from vera.gateway.shared_quota import IdentityQuotaStore
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.local_secret import local_token_key
from vera.logs import configure_logging
from vera.mcp_tokens import LOCAL_KEY_ID, TokenKey, mint
from vera.quota import QuotaPolicy
from vera.retrieval.v1 import retrieval_pb2
from vera.rpc.backends import Backends
from vera.rpc.refusals import RefusalTally
from vera.rpc.timestamps import to_timestamp
from vera.stack.launcher import EVERY_SCOPE
from vera.stack.ports import free_port

TOOLS = ("knowledge_get_context", "knowledge_search")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ERAS = (MODERN, LEGACY)
CLIENT_MODES = {MODERN: "auto", LEGACY: "legacy"}
PROJECT = "locomo-conv-26"
PROJECT_ID = "7a1d2e3f-4b5c-4d6e-8f90-a1b2c3d4e5f6"
QUERY = "When did Caroline go to the LGBTQ support group?"
SESSION_DATE = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


# In-memory services ---------------------------------------------------------------------


def retrieved(rank: int) -> retrieval_pb2.RetrievedFact:
    statement = (
        "I went to a LGBTQ support group yesterday and it was so powerful. The stories "
        "people shared gave me the courage to keep going."
    )
    turn = f"D1:{rank * 3}"
    fact = knowledge_pb2.Fact(
        fact_key=f"fk_{rank:02d}3f9a1c2b7e4d6a8c0b1e2f3a4d5c6b7",
        version_id=f"fv_{rank:02d}9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4",
        scope_id=PROJECT_ID,
        subject="Caroline",
        predicate="said",
        object=statement,
        state=knowledge_pb2.FACT_STATE_ACTIVE,
        trust_tier=1,
        authority=0.7,
        document_type="conversation",
        source_type="chat",
        citations=[
            knowledge_pb2.Citation(
                source_id="locomo-conv-26-session-1",
                locator=turn,
                title="LoCoMo conversation 26, session 1",
                uri=f"locomo://conv-26/{turn}",
                excerpt=f"Caroline: {statement}",
                verification=knowledge_pb2.VERIFICATION_STATE_VERIFIED,
            )
        ],
    )
    fact.valid_from.CopyFrom(to_timestamp(SESSION_DATE))
    fact.recorded_at.CopyFrom(to_timestamp(SESSION_DATE))
    score = 1.0 / (rank + 1)
    return retrieval_pb2.RetrievedFact(
        fact=fact,
        score=score,
        rank=rank,
        result_ref=fact.version_id,
        signals={
            "dense": 0.61 - rank / 100,
            "lexical": 0.43 - rank / 100,
            "fused": score,
            "boost": 1.0,
            "trust_tier": 1.0,
            "authority": 0.7,
            "final": score,
        },
    )


class FakeIdentity:
    def __init__(self) -> None:
        project = identity_pb2.Project(
            project_id=PROJECT_ID,
            slug=PROJECT,
            display_name="LoCoMo conversation 26",
            kind=identity_pb2.PROJECT_KIND_SHARED,
        )
        self._project = identity_pb2.ResolveProjectResponse(project=project)
        self._allowed = identity_pb2.ChargeQuotaResponse(allowed=True)

    async def EnsureLocalPrincipal(self, request: Any, **_: Any) -> Any:
        return identity_pb2.EnsureLocalPrincipalResponse(
            principal=identity_pb2.Principal(principal_id=request.principal_id)
        )

    async def ResolveProject(self, request: Any, **_: Any) -> Any:
        return self._project

    async def ChargeQuota(self, request: Any, **_: Any) -> Any:
        return self._allowed


class FakeRetrieval:
    def __init__(self) -> None:
        results = [retrieved(rank) for rank in range(1, 11)]
        self._context = retrieval_pb2.AssembleContextResponse(
            results=results,
            omitted=[
                retrieval_pb2.Omission(fact_key=f"fk_omitted_{i}", reason="token_budget")
                for i in range(3)
            ],
            token_estimate=1480,
            assembler_version="asm-3",
        )
        self._search = retrieval_pb2.SearchResponse(results=results)

    async def AssembleContext(self, request: Any, **_: Any) -> Any:
        return self._context

    async def Search(self, request: Any, **_: Any) -> Any:
        return self._search


@dataclass
class FakeBackends:
    """Stands in for ``vera.rpc.backends.Backends``: the stubs the two tools use."""

    identity: FakeIdentity
    retrieval: FakeRetrieval
    knowledge: None = None
    snapshot: None = None
    channels: tuple[()] = ()

    @classmethod
    def open(cls, settings: Settings, caller: str = "gateway") -> FakeBackends:
        return cls(identity=FakeIdentity(), retrieval=FakeRetrieval())

    async def close(self) -> None:
        pass


@contextlib.contextmanager
def fake_services() -> Iterator[None]:
    """The gateway's lifespan opens these fakes instead of gRPC channels."""
    with mock.patch.object(Backends, "open", FakeBackends.open):
        yield


# The bench's own data dir secret: the gateway gets the key derived from it, every layer
# from the HTTP client down presents a local token signed with that key, as a local
# runtime does (the local-dev gateway refuses a call without one).
LOCAL_TOKEN_KEY = local_token_key("gateway-overhead-bench-local-secret-0123456789")


def local_token(settings: Settings) -> str:
    return mint(TokenKey.local(LOCAL_TOKEN_KEY), str(settings.mcp.local_principal_id), EVERY_SCOPE,
                key_id=LOCAL_KEY_ID, lifetime_seconds=86400).token


class LocalCaller:
    """The caller the HTTP boundary resolves from a local token, for the layers below it."""

    def __init__(self, settings: Settings) -> None:
        self.caller = Caller(principal_id=str(settings.mcp.local_principal_id),
                             granted=frozenset(AuthClass), auth_profile="local-dev")

    async def authenticate(self, request: Any, backends: Any) -> Caller:
        return self.caller


def gateway_settings() -> Settings:
    # Quota on (the default shared store, counted by the fake identity) and metrics on, so
    # the guard's whole path runs as in production.
    return Settings(
        environment="local",
        mcp=McpSettings(local_token_key=LOCAL_TOKEN_KEY, port=0),
        observability=ObservabilitySettings(mcp_metrics_host="127.0.0.1", mcp_metrics_port=0),
    )


# The request, as mcp.Client sends it ------------------------------------------------------


def arguments(tool: str) -> dict[str, Any]:
    args: dict[str, Any] = {"query": QUERY, "project": PROJECT, "limit": 10}
    if tool == "knowledge_get_context":
        args["token_budget"] = 2000
    return args


def request_body(tool: str, era: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-RPC ``tools/call`` the official client sends in ``era``."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments(tool) if args is None else args}
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def request_headers(tool: str, era: str, token: str | None) -> dict[str, str]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": era,
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if era == MODERN:
        headers |= {"mcp-method": "tools/call", "mcp-name": tool}
    return headers


def encoded_request(tool: str, era: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(request_body(tool, era), separators=(",", ":")).encode()
    return body, request_headers(tool, era, local_token(gateway_settings()))


def check_answer(message: dict[str, Any]) -> None:
    """Every variant must get the real answer, not a fast error."""
    result = message.get("result", message)
    structured = result.get("structuredContent") or result.get("structured_content")
    if result.get("isError") or not structured or len(structured["results"]) != 10:
        raise RuntimeError(f"unexpected answer: {str(message)[:300]}")


# The gateway under uvicorn, in its own process --------------------------------------------


def serve() -> None:
    """Child process: the gateway as ``vera.entrypoints.mcp.main`` runs it (its logging,
    ``uvicorn.run`` with loop and HTTP parser ``auto``: uvloop and httptools), on a free
    port it prints first."""
    # uvicorn binds the port itself, as in production: a socket handed to it lacks
    # TCP_NODELAY under the asyncio loop, which adds 40 ms delayed-ACK stalls.
    port = free_port()
    print(port, flush=True)
    settings = gateway_settings()
    configure_logging(settings.observability.log_level, "mcp")
    with fake_services():
        uvicorn.run(
            build_app(settings),
            host="127.0.0.1",
            port=port,
            workers=1,
            log_level="warning",
            ws="none",
            lifespan="on",
            log_config=None,
            access_log=False,
        )


def wait_until_serving(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextlib.contextmanager
def gateway_process() -> Iterator[int]:
    """Runs ``serve`` in a child process (same interpreter and import path); yields its
    port once it answers."""
    child = subprocess.Popen(
        [sys.executable, "-c", "from bench.gateway_overhead import serve; serve()"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        wait_until_serving(port)
        yield port
    finally:
        child.terminate()
        child.wait(10)


# Callers, one per layer -------------------------------------------------------------------

Call = Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def mcp_client(port: int, tool: str, era: str) -> AsyncIterator[Call]:
    args = arguments(tool)
    http = create_mcp_http_client(
        headers={"authorization": f"Bearer {local_token(gateway_settings())}"})
    transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
    async with http, Client(transport, mode=CLIENT_MODES[era]) as client:
        if client.protocol_version != era:
            raise RuntimeError(f"negotiated {client.protocol_version}, not {era}")
        # The first call also lists the tools: the client caches their output schemas.
        check_answer((await client.call_tool(tool, args)).model_dump())

        async def call() -> None:
            await client.call_tool(tool, args)

        yield call


@contextlib.asynccontextmanager
async def httpx_post(port: int, tool: str, era: str) -> AsyncIterator[Call]:
    body, headers = encoded_request(tool, era)
    url = f"http://127.0.0.1:{port}/mcp"
    async with httpx.AsyncClient() as http:
        check_answer((await http.post(url, content=body, headers=headers)).json())

        async def call() -> None:
            (await http.post(url, content=body, headers=headers)).raise_for_status()

        yield call


@contextlib.asynccontextmanager
async def raw_socket(port: int, tool: str, era: str) -> AsyncIterator[Call]:
    body, headers = encoded_request(tool, era)
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{head}content-length: {len(body)}\r\n\r\n"
    ).encode() + body
    connection: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def exchange() -> bytes:
        if not connection or connection[0][0].at_eof():
            # uvicorn closes a connection idle for 5 s, as it may be between rounds.
            connection[:] = [await asyncio.open_connection("127.0.0.1", port)]
        reader, writer = connection[0]
        writer.write(request)
        response_head = await reader.readuntil(b"\r\n\r\n")
        if not response_head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(response_head.decode())
        length = next(
            int(line.split(b":", 1)[1])
            for line in response_head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return await reader.readexactly(length)

    check_answer(json.loads(await exchange()))

    async def call() -> None:
        await exchange()

    try:
        yield call
    finally:
        for _, writer in connection:
            writer.close()
            await writer.wait_closed()


@contextlib.asynccontextmanager
async def asgi_direct(app: Starlette, tool: str, era: str) -> AsyncIterator[Call]:
    """The app called as uvicorn calls it, one request at a time."""
    body, headers = encoded_request(tool, era)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8080"), (b"content-length", str(len(body)).encode())]
        + [(name.encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }

    async def exchange() -> bytes:
        chunks: list[bytes] = []
        answered = asyncio.Event()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answered.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] != 200:
                raise RuntimeError(f"status {message['status']}")
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    answered.set()

        await app(dict(scope), receive, send)
        return b"".join(chunks)

    check_answer(json.loads(await exchange()))

    async def call() -> None:
        await exchange()

    yield call


@contextlib.asynccontextmanager
async def guard_direct(tool: str) -> AsyncIterator[Call]:
    """The guard wired as ``build_app`` wires it, called without the MCP SDK."""
    settings = gateway_settings()
    backends: Any = FakeBackends.open(settings)
    specs = tools_for_profile(settings.mcp.tool_profile)
    guard = Guard(
        settings=settings,
        tools=specs,
        handlers=handlers_for_profile(settings.mcp.tool_profile),
        authenticator=LocalCaller(settings),
        quota=QuotaPolicy(limits_from_settings(settings.mcp), IdentityQuotaStore(lambda: backends)),
        metrics=ToolMetrics(spec.name for spec in specs),
        backends=lambda: backends,
        refusals=RefusalTally("gateway"),
    )
    args = arguments(tool)
    check_answer((await guard.call(tool, args)).model_dump())

    async def call() -> None:
        await guard.call(tool, args)

    yield call


@contextlib.asynccontextmanager
async def handler_and_render(tool: str) -> AsyncIterator[Call]:
    """The tool body (its gRPC request, the protobuf -> JSON views) and its rendering."""
    settings = gateway_settings()
    backends: Any = FakeBackends.open(settings)
    ctx = CallContext(
        caller=LocalCaller(settings).caller,
        backends=backends,
        settings=settings,
        protocol_version=MODERN,
        visible_tools=(),
        projects=ProjectCache(settings.mcp.project_cache_seconds),
    )
    spec = next(spec for spec in CODING_TOOLS if spec.name == tool)
    args = spec.arguments.validate(arguments(tool))

    async def call() -> None:
        render(spec, await spec.handler(ctx, args))

    yield call


# Running and reporting --------------------------------------------------------------------

LAYERS = ("mcp.Client", "httpx", "raw socket", "ASGI", "guard.call", "handler + render")
# What the difference between a layer's p50 and the next one's stands for.
SPLIT = (
    "mcp.Client's own MCP layer",
    "httpx (HTTP client)",
    "uvicorn, socket, scheduling",
    "Starlette + MCP SDK transport and dispatch",
    "guard: auth, bounds, quota, metrics",
    "handler + render",
)


@dataclass(frozen=True)
class Variant:
    tool: str
    layer: str
    era: str | None  # None: below the protocol, the same for both eras

    @property
    def name(self) -> str:
        return f"{self.layer} {self.era}" if self.era else self.layer


def variants_and_callers(
    port: int, app: Starlette
) -> list[tuple[Variant, contextlib.AbstractAsyncContextManager[Call]]]:
    out: list[tuple[Variant, contextlib.AbstractAsyncContextManager[Call]]] = []
    for tool in TOOLS:
        for era in ERAS:
            out += [
                (Variant(tool, "mcp.Client", era), mcp_client(port, tool, era)),
                (Variant(tool, "httpx", era), httpx_post(port, tool, era)),
                (Variant(tool, "raw socket", era), raw_socket(port, tool, era)),
                (Variant(tool, "ASGI", era), asgi_direct(app, tool, era)),
            ]
        out += [
            (Variant(tool, "guard.call", None), guard_direct(tool)),
            (Variant(tool, "handler + render", None), handler_and_render(tool)),
        ]
    return out


async def measure(calls: int, rounds: int) -> dict[Variant, list[float]]:
    samples: dict[Variant, list[float]] = {}
    with gateway_process() as port, fake_services():
        app = build_app(gateway_settings())
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(app.router.lifespan_context(app))
            opened = [
                (variant, await stack.enter_async_context(caller))
                for variant, caller in variants_and_callers(port, app)
            ]
            for _, call in opened:
                for _ in range(max(10, calls // 5)):
                    await call()  # warm-up
            for _ in range(rounds):
                for variant, call in opened:
                    await call()  # untimed: reopens a connection the server closed meanwhile
                    timings = samples.setdefault(variant, [])
                    for _ in range(calls):
                        started = time.perf_counter()
                        await call()
                        timings.append((time.perf_counter() - started) * 1000)
    return samples


def report(samples: dict[Variant, list[float]]) -> list[dict]:
    """Prints each tool's variants and its split by layer; returns the variants of every tool
    side by side as the run's record's table (bench/record.py; the split is their
    differences)."""
    width = max(len(variant.name) for variant in samples) + 2
    label_width = max(len(label) for label in SPLIT) + 2
    figures: dict[str, list[Any]] = {}
    for tool in TOOLS:
        print(f"\n{tool} (ms per call)")
        print(f"  {'variant':<{width}}{'p50':>8}{'p95':>8}{'n':>7}")
        p50: dict[tuple[str, str | None], float] = {}
        for variant, values in samples.items():
            if variant.tool != tool:
                continue
            p50[variant.layer, variant.era] = percentile(values, 50)
            figures.setdefault(variant.name, []).extend(
                [percentile(values, 50), percentile(values, 95), len(values)])
            print(
                f"  {variant.name:<{width}}{percentile(values, 50):>8.3f}"
                f"{percentile(values, 95):>8.3f}{len(values):>7}"
            )
        print(f"  {'split by p50 differences':<{label_width}}" + "".join(f"{e:>12}" for e in ERAS))
        for i, label in enumerate(SPLIT):
            row = f"  {label:<{label_width}}"
            for era in ERAS:
                layers = [p50.get((layer, era), p50.get((layer, None), 0.0)) for layer in LAYERS]
                below = layers[i + 1] if i + 1 < len(layers) else 0.0
                row += f"{layers[i] - below:>12.3f}"
            print(row)
    heads = [f"`{tool}` {part}" for tool in TOOLS for part in ("p50 ms", "p95 ms", "n")]
    return [record.table(["variant", *heads],
                         [[name, *cells] for name, cells in figures.items()
                          if len(cells) == len(heads)],
                         digits=[None, *([3, 3, 0] * len(TOOLS))])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/bench gateway-overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100, help="timed calls per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    tables = report(asyncio.run(measure(args.calls, args.rounds)))
    record.write("gateway-overhead", argv if argv is not None else sys.argv[1:], tables,
                 wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
