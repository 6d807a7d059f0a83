"""`vera up`: the whole embedded stack in the foreground.

Embedded PostgreSQL, then the four services as child processes (`vera serve <svc>` on
free loopback ports), then the MCP gateway and the REST API. The addresses are written to
``<data-dir>/run/stack.json`` so `vera ingest --data-dir` finds the running stack. Every
run generates the internal call key (``VERA_RPC__AUTH_KEY``), hands it to each child and
writes it, readable by the owner only, to ``<data-dir>/run/rpc.key`` for the CLI's calls.
SIGINT/SIGTERM stop, in waves, the REST API, the gateway, retrieval and snapshot, then
knowledge and identity (callers before the ones they call, each draining first), remove the
run files and stop PostgreSQL last. A child that dies, the embedded postmaster included
(``PostgresChild``), is started again with the same command after a delay that doubles per
crash (``RestartPolicy``); one that crashes more often than the policy allows stops the
whole stack, which exits 1 (``GaveUp``).

A child is ready once its probe answers *and* the answering port is the child's own
listening socket: a stranger already on the port answers a probe too. A port the user
chose (gateway, metrics, REST API) that is taken stops `vera up` before anything starts,
with one line naming the port and the setting that moves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vera.config import Settings, StackSettings
from vera.local_secret import ensure_secret, local_token_key
from vera.resource_stack import ResourceStack
from vera.rpc.retries import RECONNECT_OPTIONS
from vera.stack import StackError
from vera.stack.ports import free_port
from vera.stack.profile import admit_profile
from vera.stack.run_files import (
    key_file,
    read_stack_file,
    stack_file,
    write_key_file,
    write_stack_file,
)

if TYPE_CHECKING:
    from vera.db.embedded import EmbeddedPostgres

log = logging.getLogger(__name__)

SERVICES = ("identity", "knowledge", "retrieval", "snapshot")
# The fronts drain first while every service still answers them; retrieval and snapshot
# read knowledge, so it and identity (which only the fronts call) stop last.
STOP_WAVES = (("api",), ("gateway",), ("retrieval", "snapshot"), ("knowledge", "identity"))
START_TIMEOUT_SECONDS = 120.0
# A child gets this long beyond its own drain (the longest RPC deadline or tool-call
# budget) before SIGKILL.
STOP_MARGIN_SECONDS = 10.0
POSTGRES_POLL_SECONDS = 0.5


class GaveUp(Exception):
    """A child crashed more often than the restart policy allows; the message says which
    (and the port, when another process holds it)."""

    def __init__(self, message: str, child: str, crashes: int) -> None:
        super().__init__(message)
        self.child = child
        self.crashes = crashes


@dataclass
class RestartPolicy:
    """When a crashed child starts again: after a delay that doubles per crash up to a cap
    and is back to the first one after the child served ``restart_reset_seconds``; never
    once it crashed more than ``max_restarts`` times within ``restart_window_seconds``."""

    settings: StackSettings
    crashes: deque[float] = field(default_factory=deque)
    delay: float = 0.0

    def next_delay(self, now: float, serving_since: float | None) -> float | None:
        """Records a crash at ``now`` (``serving_since``: when the child last became ready,
        None when it crashed while starting); the delay before the restart, or None."""
        policy = self.settings
        while self.crashes and self.crashes[0] <= now - policy.restart_window_seconds:
            self.crashes.popleft()
        self.crashes.append(now)
        if len(self.crashes) > policy.max_restarts:
            return None
        stable = serving_since is not None and now - serving_since >= policy.restart_reset_seconds
        if self.delay == 0.0 or stable:
            self.delay = policy.restart_backoff_seconds
        else:
            self.delay = min(self.delay * 2, policy.restart_backoff_max_seconds)
        return self.delay

    def gave_up(self, name: str, now: float, cause: str | None = None) -> GaveUp:
        """``cause``: what made the child crash, when known (a port another process holds)."""
        policy = self.settings
        because = f": {cause}" if cause else ""
        return GaveUp(
            f"{name} crashed {len(self.crashes)} times in {now - self.crashes[0]:.0f} s "
            f"(VERA_STACK__MAX_RESTARTS={policy.max_restarts} within "
            f"VERA_STACK__RESTART_WINDOW_SECONDS={policy.restart_window_seconds:g}); "
            f"giving up{because}",
            name,
            len(self.crashes),
        )


@dataclass(frozen=True)
class Listener:
    """A TCP port a child binds, and what a user does to move it elsewhere."""

    host: str
    port: int
    how_to_move: str

    def in_use(self) -> bool:
        """Whether another socket listens there now (one in TIME_WAIT does not count: the
        servers bind with SO_REUSEADDR, as this check does)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self.port))
            except OSError:
                return True
        return False

    def busy(self) -> str:
        return f"port {self.port} is in use; {self.how_to_move}"


def first_busy(listeners: Sequence[Listener]) -> str | None:
    """The line naming the first of ``listeners`` another process holds; None when all are
    free."""
    return next((listener.busy() for listener in listeners if listener.in_use()), None)


class Child:
    """A service, the gateway or the REST API: one child process, started again with the
    same command and environment (so the same address and settings) after it dies.
    ``listeners``: the ports it binds, the one its readiness probe calls first."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        ready: Callable[[Child], Awaitable[None]],
        listeners: Sequence[Listener],
    ) -> None:
        self.name = name
        self._argv = tuple(argv)
        self._env = dict(env)
        self._ready = ready
        self.listeners = tuple(listeners)
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None

    async def start(self) -> None:
        """Spawns the process and returns once it serves; StackError when it exits or is
        not ready in time."""
        self.process = await asyncio.create_subprocess_exec(
            *self._argv, env=self._env, start_new_session=True
        )
        await self._ready(self)

    def listens(self) -> bool:
        """Whether this process itself listens on its probed port."""
        import psutil  # the [server] extra; clients of a running stack import this module

        if self.process is None:
            return False
        try:
            sockets = psutil.Process(self.process.pid).net_connections(kind="inet")
        except psutil.Error:  # gone meanwhile
            return False
        port = self.listeners[0].port
        return any(
            conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
            for conn in sockets
        )

    def busy_port(self) -> str | None:
        """Once the process is gone: the line naming a port of its that another process
        holds (why it could not serve), or None."""
        return first_busy(self.listeners)

    def failed(self) -> str:
        """Why the process that exited before serving did."""
        cause = self.busy_port()
        return f"{self.name} exited with code {self.returncode}" + (f": {cause}" if cause else "")

    async def exited(self) -> str:
        """Waits for the process to end; how it ended."""
        assert self.process is not None, "start() first"
        code = await self.process.wait()
        if code >= 0:
            return f"code {code}"
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:  # a real-time signal has no name
            return f"signal {-code}"

    async def stop(self, grace: float) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), grace)
        except TimeoutError:
            log.warning("%s did not stop in %.0f s; killing it", self.name, grace)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


class PostgresChild:
    """The embedded PostgreSQL under supervision. pg_ctl daemonizes the postmaster, so it
    is no child of ours to wait for: its pid is polled, and a restart starts it on the same
    socket, so the DSN every service holds stays valid and their pools reconnect."""

    name = "postgres"

    def __init__(self, pg: EmbeddedPostgres) -> None:
        self._pg = pg

    @property
    def pid(self) -> int | None:
        return self._pg.running_pid()

    async def start(self) -> None:
        try:
            await asyncio.to_thread(self._pg.restart)
        except (subprocess.SubprocessError, OSError) as exc:
            raise StackError(f"PostgreSQL did not start: {type(exc).__name__}") from None

    async def exited(self) -> str:
        # No event to wait on: the postmaster is not our child.
        while self._pg.running_pid() is not None:  # noqa: ASYNC110
            await asyncio.sleep(POSTGRES_POLL_SECONDS)
        return "postmaster gone"

    async def stop(self, grace: float) -> None:
        """Stopped by ``run_stack`` itself, last."""

    def busy_port(self) -> str | None:
        """Its socket is a Unix one in the data dir: no port to be taken."""
        return None


Supervised = Child | PostgresChild


async def keep_running(
    child: Supervised, policy: RestartPolicy, on_restart: Callable[[], None]
) -> None:
    """Starts ``child`` again whenever it dies, per ``policy``; raises GaveUp when the
    policy says stop. ``on_restart`` runs once a restarted child serves."""
    serving_since: float | None = time.monotonic()
    while True:
        how = await child.exited()
        now = time.monotonic()
        delay = policy.next_delay(now, serving_since)
        if delay is None:
            raise policy.gave_up(child.name, now, child.busy_port())
        log.warning("%s exited (%s); restarting it in %.1f s", child.name, how, delay)
        await asyncio.sleep(delay)
        serving_since = None
        try:
            await child.start()
        except StackError as exc:
            log.warning("%s", exc)
            await child.stop(0)  # not ready in time: counts as a crash too
            continue
        serving_since = time.monotonic()
        log.info("%s is serving again (pid %s)", child.name, child.pid)
        on_restart()


async def _wait_ready(child: Child, answers: Callable[[], Awaitable[bool]], timeout: float) -> None:
    """Polls ``answers`` until it is true while ``child`` itself listens on the port it
    probes; StackError when the child exits first or the time is up."""
    give_up = time.monotonic() + timeout
    while True:
        if child.returncode is not None:
            raise StackError(child.failed())
        # A stranger on the port answers the probe while the child is still starting (or
        # failing to bind): only the child's own listener makes the answer count.
        if await answers() and child.listens():
            return
        if time.monotonic() > give_up:
            raise StackError(f"{child.name} did not become ready in {timeout:.0f} s")
        await asyncio.sleep(0.2)


async def _wait_grpc_healthy(address: str, child: Child, timeout: float) -> None:
    async with grpc.aio.insecure_channel(address, options=RECONNECT_OPTIONS) as channel:
        stub = health_pb2_grpc.HealthStub(channel)

        async def serving() -> bool:
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
            except grpc.aio.AioRpcError:
                return False
            return reply.status == health_pb2.HealthCheckResponse.SERVING

        await _wait_ready(child, serving, timeout)


async def _wait_http_ok(url: str, child: Child, timeout: float) -> None:
    async with httpx.AsyncClient() as client:

        async def ok() -> bool:
            try:
                return (await client.get(url, timeout=1.0)).status_code == 200
            except httpx.HTTPError:
                return False

        await _wait_ready(child, ok, timeout)


def grpc_ready(
    address: str, timeout: float = START_TIMEOUT_SECONDS
) -> Callable[[Child], Awaitable[None]]:
    """A child's readiness: gRPC health SERVING at ``address``, from the child itself."""
    return lambda child: _wait_grpc_healthy(address, child, timeout)


def http_ready(
    url: str, timeout: float = START_TIMEOUT_SECONDS
) -> Callable[[Child], Awaitable[None]]:
    """A child's readiness: 200 from ``url``, answered by the child itself."""
    return lambda child: _wait_http_ok(url, child, timeout)


def _loopback_url(host: str, port: int) -> str:
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"


def front_listeners(settings: Settings, port: int) -> dict[str, tuple[Listener, ...]]:
    """The ports the user chose, per front (``port``: the gateway's, from --port or
    VERA_MCP__PORT): the gateway's own and its metrics listener's, and the REST API's."""
    gateway = [
        Listener(
            settings.mcp_bind_host,
            port,
            "set VERA_MCP__PORT (or --port) to move the MCP gateway",
        )
    ]
    observability = settings.observability
    if observability.mcp_metrics_enabled:
        gateway.append(
            Listener(
                observability.mcp_metrics_host,
                observability.mcp_metrics_port,
                "set VERA_OBSERVABILITY__MCP_METRICS_PORT to move the gateway's metrics "
                "listener (or VERA_OBSERVABILITY__MCP_METRICS_ENABLED=false)",
            )
        )
    api = Listener(
        settings.api_bind_host, settings.api.port, "set VERA_API__PORT to move the REST API"
    )
    return {"gateway": tuple(gateway), "api": (api,)}


def _service_listener(address: str) -> Listener:
    host, port = address.rsplit(":", 1)
    return Listener(
        host,
        int(port),
        "vera up picked it as free for a service and another process took it: start it again",
    )


def console_address(api_url: str, sign_in_token: str, settings: Settings) -> str:
    """The console's address; in the local profile it carries the one-time sign-in token
    (written to stdout and stack.json, never to a log), elsewhere curators sign in with an
    API key."""
    if settings.auth_profile == "local-dev":
        return f"{api_url}/console/sign-in?token={sign_in_token}"
    return f"{api_url}/console/"


# The variable `vera connect` exports a runtime's MCP token in (vera.integrations).
MCP_TOKEN_VARIABLE = "VERA_MCP_TOKEN"


def client_snippet(mcp_url: str) -> str:
    """The MCP client config a developer pastes: the bearer token every call needs (a local
    one too), from the environment."""
    server = {"type": "http", "url": mcp_url,
              "headers": {"Authorization": f"Bearer ${{{MCP_TOKEN_VARIABLE}}}"}}
    return json.dumps({"mcpServers": {"vera": server}}, indent=2)


def _listening(host: str, port: int) -> str:
    every = " (every interface)" if host in ("0.0.0.0", "::") else ""
    return f"{host}:{port}{every}"


def banner(settings: Settings, data_dir: Path, port: int, mcp_url: str, api_url: str,
           console_url: str) -> str:
    """What `vera up` prints when ready: the URLs on this machine, the addresses it really
    listens on, the Host names it serves (and the settings that add more), and a client
    config that works with the deployment's authentication."""
    lines = [
        "", "VERA is ready.",
        f"  MCP endpoint: {mcp_url}", f"  REST API:     {api_url}",
        f"  Console:      {console_url}", f"  Data dir:     {data_dir}",
        f"  Listening:    MCP {_listening(settings.mcp_bind_host, port)}, REST API "
        f"{_listening(settings.api_bind_host, settings.api.port)}, plain HTTP",
    ]
    if settings.auth_profile == "local-dev":
        lines += [
            "", "Connect a coding runtime, in its repository (runtime: claude-code, codex or "
            "opencode):",
            f"  vera connect <runtime> --api-url {api_url} --mcp-url {mcp_url} "
            f"--data-dir {shlex.quote(str(data_dir))}",
            "", "MCP client config (`vera connect <runtime>` writes it and a local token; by "
            f"hand: {MCP_TOKEN_VARIABLE} from POST {api_url}/identity/mcp-token with the "
            "data dir's local.secret as the bearer):",
            client_snippet(mcp_url),
        ]
    else:
        lines += [
            f"  Hosts served: MCP {', '.join(settings.mcp.allowed_hosts)} "
            "(VERA_MCP__ALLOWED_HOSTS); REST API "
            f"{', '.join(settings.api.allowed_hosts)} (VERA_API__ALLOWED_HOSTS)",
            "  Other machines reach it through TLS in front, at a name those settings list "
            "(docs/deploy.md, One VM).",
            "", "MCP client config (`vera connect <runtime>` writes it and the token; "
            f"by hand: {MCP_TOKEN_VARIABLE} from POST {api_url}/identity/mcp-token with "
            "your API key):",
            client_snippet(mcp_url),
        ]
    return "\n".join([*lines, "", "Press Ctrl-C to stop."])


async def run_stack(
    settings: Settings, data_dir: Path, port: int, *, allow_profile_change: bool = False
) -> int:
    """Runs until signalled, or until a child crashed more often than the restart policy
    allows; returns the process exit code. ``allow_profile_change``: serve a data dir that
    held an authenticated deployment in local mode all the same (vera.stack.profile)."""
    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if (running := read_stack_file(data_dir)) is not None:
        raise StackError(
            f"a VERA stack (pid {running['pid']}) already uses {data_dir}; stop it first"
        )
    fronts = front_listeners(settings, port)
    # Before anything starts: a taken port is the user's to move, not a crash to retry.
    if (busy := first_busy([*fronts["gateway"], *fronts["api"]])) is not None:
        raise StackError(busy)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    # Imported here so `vera up`'s module loads without the [server] extra until it runs.
    from vera.db.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(data_dir)
    children: list[Child] = []
    # Closed last first: the keepers, the children in waves, the run files, PostgreSQL.
    async with ResourceStack("vera up") as resources:
        resources.closing(lambda: log.info("stopped"))
        resources.closing(lambda: asyncio.to_thread(pg.stop))
        resources.closing(lambda: _remove_run_files(data_dir))
        resources.closing(lambda: _stop_children(children, settings))
        try:
            log.info("starting embedded PostgreSQL in %s", pg.pgdata)
            await asyncio.to_thread(pg.start)
            dsn = await pg.ensure_database()
            await admit_profile(settings, data_dir, dsn, allow_change=allow_profile_change)
            started = await _start_children(settings, data_dir, port, dsn, fronts, children)
            return await _supervise(
                settings, data_dir, port, [PostgresChild(pg), *children], started, stop,
                resources)
        except StackError as exc:
            log.error("%s", exc)
            return 1


@dataclass(frozen=True)
class _Started:
    """Where the children `vera up` started answer."""

    addresses: dict[str, str]
    metrics_ports: dict[str, int]
    mcp_url: str
    api_url: str
    console_url: str


async def _start_children(
    settings: Settings,
    data_dir: Path,
    port: int,
    dsn: str,
    fronts: Mapping[str, Sequence[Listener]],
    children: list[Child],
) -> _Started:
    """Starts the services, then the gateway and the REST API; each joins ``children``
    (what the stop stops) as it is spawned."""
    addresses = {name: f"127.0.0.1:{free_port()}" for name in SERVICES}
    # Each service's own metrics listener, on loopback (vera.observability.service_metrics).
    metrics_ports = {name: free_port() for name in SERVICES}
    secret = ensure_secret(data_dir)
    rpc_key = secrets.token_urlsafe(32)
    write_key_file(data_dir, rpc_key)
    console_token = secrets.token_urlsafe(32)
    env = _stack_env(data_dir, dsn, port, addresses, rpc_key, console_token)
    services = [
        Child(
            name,
            [sys.executable, "-m", "vera.cli", "serve", name, "--address", addresses[name]],
            {
                **env,
                "VERA_OBSERVABILITY__SERVICE_METRICS_HOST": "127.0.0.1",
                "VERA_OBSERVABILITY__SERVICE_METRICS_PORT": str(metrics_ports[name]),
            },
            grpc_ready(addresses[name]),
            [_service_listener(addresses[name])],
        )
        for name in SERVICES
    ]
    children.extend(services)
    await asyncio.gather(*(child.start() for child in services))

    base = _loopback_url(settings.mcp_bind_host, port)
    api_url = _loopback_url(settings.api_bind_host, settings.api.port)
    for child in (
        Child(
            "gateway",
            [sys.executable, "-m", "vera.entrypoints.mcp.main"],
            # It verifies local tokens with a key derived from the secret and never
            # holds the secret, the database's superuser password (nor the DSN with it).
            {**{k: v for k, v in env.items() if k != "VERA_DATABASE__DSN"},
             "VERA_MCP__LOCAL_TOKEN_KEY": local_token_key(secret)},
            http_ready(f"{base}/healthz"),
            fronts["gateway"],
        ),
        Child(
            "api",
            [sys.executable, "-m", "vera.entrypoints.api.main"],
            # The REST API's local administrator proves the secret (vera.local_secret),
            # and the API mints local MCP tokens for it.
            {**env, "VERA_API__LOCAL_SECRET": secret},
            http_ready(f"{api_url}/readyz"),
            fronts["api"],
        ),
    ):
        children.append(child)
        await child.start()
    console_url = console_address(api_url, console_token, settings)
    return _Started(addresses, metrics_ports, f"{base}/mcp", api_url, console_url)


def _stack_env(
    data_dir: Path,
    dsn: str,
    port: int,
    addresses: Mapping[str, str],
    rpc_key: str,
    console_token: str,
) -> dict[str, str]:
    """The environment every child starts with."""
    # Tracing (OTEL_*) passes on as set, but each child names itself (vera-<child>):
    # one OTEL_SERVICE_NAME for six processes would merge them in the trace store.
    inherited = {k: v for k, v in os.environ.items() if k != "OTEL_SERVICE_NAME"}
    return {
        **inherited,
        "VERA_DATA_DIR": str(data_dir),
        "VERA_DATABASE__DSN": dsn,
        "VERA_RPC__AUTH_KEY": rpc_key,
        "VERA_MCP__PORT": str(port),
        # Only the local profile signs in with it (vera.api.console.pages).
        "VERA_API__CONSOLE_SIGN_IN_TOKEN": console_token,
        **{f"VERA_SERVICES__{name.upper()}": address for name, address in addresses.items()},
    }


async def _supervise(
    settings: Settings,
    data_dir: Path,
    port: int,
    supervised: list[Supervised],
    started: _Started,
    stop: asyncio.Event,
    resources: ResourceStack,
) -> int:
    """Keeps every child running until ``stop`` is set (0) or one gave up (1)."""
    restarts = dict.fromkeys((child.name for child in supervised), 0)

    def record_children() -> None:
        write_stack_file(
            data_dir,
            {
                "pid": os.getpid(),
                "auth_profile": settings.auth_profile,
                "mcp_url": started.mcp_url,
                "api_url": started.api_url,
                "console_url": started.console_url,
                "services": started.addresses,
                "metrics": f"http://{settings.observability.mcp_metrics_host}:"
                f"{settings.observability.mcp_metrics_port}/metrics",
                "service_metrics": {
                    name: f"http://127.0.0.1:{port}/metrics"
                    for name, port in started.metrics_ports.items()
                },
                "pids": {child.name: child.pid for child in supervised},
                "restarts": restarts,
            },
        )

    def restarted(name: str) -> Callable[[], None]:
        def record() -> None:
            restarts[name] += 1
            record_children()

        return record

    record_children()
    print(banner(settings, data_dir, port, started.mcp_url, started.api_url,
                 started.console_url), flush=True)
    keepers = [
        asyncio.create_task(
            keep_running(child, RestartPolicy(settings.stack), restarted(child.name))
        )
        for child in supervised
    ]
    resources.closing(lambda: _cancel_all(keepers))
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopper, *keepers}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    exit_code = 0
    for task in done - {stopper}:
        log.error("%s", task.exception())
        exit_code = 1
    return exit_code


async def _cancel_all(tasks: Sequence[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _stop_children(children: Sequence[Child], settings: Settings) -> None:
    """Callers before the ones they call (PostgreSQL is stopped after); each wave stops
    together, a call in flight given its longest deadline to finish."""
    grace = (
        max(settings.rpc.longest_deadline_seconds, settings.mcp.request_budget_seconds)
        + STOP_MARGIN_SECONDS
    )
    for wave in STOP_WAVES:
        await asyncio.gather(*(child.stop(grace) for child in children if child.name in wave))


def _remove_run_files(data_dir: Path) -> None:
    for path in (stack_file(data_dir), key_file(data_dir)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
