"""Containers of the VERA image as local processes: what the chart runner
(rendered_cluster.py) and the compose runner (compose_host.py) share, neither Helm's nor
Compose's (no container runtime runs on these machines).

- The image: its ``ENV`` and ``WORKDIR`` from the Dockerfile's runtime stage, its
  ``/opt/vera/venv`` (this checkout's ``.venv``) and its baked model directory (the
  Dockerfile's own export step, run once into pytest's cache).
- Names: every container has a loopback address of its own (``127.a.b.n``), and each
  process runs in a private mount namespace (``unshare --mount``) whose ``/etc/hosts`` maps
  the names the orchestrator would resolve; the machine's own ``/etc/hosts`` is untouched.
- A wildcard bind (``0.0.0.0``) means the container's own network namespace; here every
  process shares the machine's, so that value becomes the container's address.
- Writable volumes are fresh directories bind-mounted at their paths in that namespace.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import random
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deploy_manifests import ROOT
from dockerfile_parse import DockerfileParser

from vera.db.embedded import EmbeddedPostgres

# What the python base image's PATH is before the Dockerfile prepends the venv.
BASE_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGE_VENV = "/opt/vera/venv"
IMAGE_MODELS = "/opt/vera/data/models"
WILDCARD = "0.0.0.0"
# Where a checkout that a container's own mount would hide waits, inside the namespace's
# private /opt, until it is bound back at its path.
CHECKOUT_STASH = "/opt/.vera-checkout"


def image_config(dockerfile: Path = ROOT / "Dockerfile", stage: str = "runtime",
                 ) -> tuple[dict[str, str], str]:
    """The ``ENV`` (``$PATH`` expanded from the base image's) and the ``WORKDIR`` of one
    stage of the Dockerfile."""
    parser = DockerfileParser(str(dockerfile))
    env: dict[str, str] = {"PATH": BASE_IMAGE_PATH}
    workdir, in_stage = "/", False
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            in_stage = instruction["value"].split()[-1] == stage
        elif in_stage and instruction["instruction"] == "ENV":
            for name, value in _env_pairs(instruction["value"]):
                env[name] = value.replace("$PATH", env["PATH"])
        elif in_stage and instruction["instruction"] == "WORKDIR":
            workdir = instruction["value"]
    return env, workdir


def _env_pairs(value: str) -> Iterator[tuple[str, str]]:
    for word in shlex.split(value.replace("\\\n", " ")):
        name, _, val = word.partition("=")
        yield name, val


def image_cmd(dockerfile: Path = ROOT / "Dockerfile", stage: str = "runtime") -> list[str]:
    """The ``CMD`` of a stage (exec form): what a container runs when nothing sets one."""
    parser = DockerfileParser(str(dockerfile))
    cmd: list[str] = []
    in_stage = False
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            in_stage = instruction["value"].split()[-1] == stage
        elif in_stage and instruction["instruction"] == "CMD":
            value = instruction["value"].strip()
            cmd = json.loads(value) if value.startswith("[") else ["/bin/sh", "-c", value]
    return cmd


def baked_models(cache: pytest.Cache) -> Path:
    """The image's model directory: the Dockerfile's own build step (its ``python -c`` that
    exports MiniLM to ONNX and quantizes it), run once into pytest's cache."""
    directory = cache.mkdir("vera-models")
    run = next(i["value"] for i in DockerfileParser(str(ROOT / "Dockerfile")).structure
               if i["instruction"] == "RUN" and IMAGE_MODELS in i["value"])
    [script] = re.findall(r'python -c "([^"]+)"', run)
    built = subprocess.run([sys.executable, "-c", script.replace(IMAGE_MODELS, str(directory))],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    return directory


@contextmanager
def embedded_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of its own, outside /tmp (each container mounts its own /tmp,
    and a DSN names the server's socket directory)."""
    with tempfile.TemporaryDirectory(prefix="vera-rendered-pg-", dir="/var/tmp") as tmp:
        pg = EmbeddedPostgres(Path(tmp))
        pg.start()
        try:
            yield pg
        finally:
            pg.stop()


def address_block() -> Iterator[str]:
    """Loopback addresses nobody else on this machine is likely to use (127.a.b.n)."""
    a, b = random.randrange(1, 255), random.randrange(1, 255)
    return (f"127.{a}.{b}.{n}" for n in range(1, 255))


def bind_to(value: str, address: str, wildcard: str = WILDCARD) -> str:
    """``value`` with a wildcard bind (alone or as ``HOST:PORT``) made ``address``."""
    if value == wildcard:
        return address
    if value.startswith(wildcard + ":"):
        return address + value[len(wildcard):]
    return value


@dataclass(kw_only=True)
class ContainerProcess:
    """One container: its address, exact argv and environment, and writable mounts."""

    name: str
    address: str
    argv: list[str]
    env: dict[str, str]
    mounts: dict[str, Path]
    log_path: Path
    process: subprocess.Popen | None = field(default=None, repr=False)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class ContainerHost:
    """Starts :class:`ContainerProcess` es in their namespaces, against one hosts file."""

    def __init__(self, hosts_file: Path, model_dir: Path | None, *, checkout: Path = ROOT,
                 ) -> None:
        self.hosts_file = hosts_file
        self.model_dir = model_dir
        # Stands in for the image's installed code: the venv at /opt/vera/venv is the
        # checkout's editable one, so its sources (and its scripts' interpreter) must stay
        # visible at their own path.
        self.checkout = checkout

    def write_hosts(self, names: dict[str, list[str]]) -> None:
        """``names``: address -> the names that resolve to it."""
        lines = ["127.0.0.1 localhost"]
        lines += [f"{address} {' '.join(aliases)}" for address, aliases in names.items()]
        self.hosts_file.write_text("\n".join(lines) + "\n")

    def _mount_script(self, container: ContainerProcess) -> str:
        binds = {IMAGE_VENV: self.checkout / ".venv", **container.mounts}
        if self.model_dir is not None:
            binds[IMAGE_MODELS] = self.model_dir
        lines = ["set -e", f"mount --bind {shlex.quote(str(self.hosts_file))} /etc/hosts",
                 "mount -t tmpfs vera-image /opt"]
        sources = [str(source) for source in binds.values()]

        def covers_a_source(target: str) -> bool:  # e.g. the container's /tmp over our workdir
            return any(source.startswith(target.rstrip("/") + "/") for source in sources)

        def bind(source: str, target: str) -> str:
            quoted = shlex.quote(target)
            return f"mkdir -p {quoted} && mount --bind {shlex.quote(source)} {quoted}"

        hidden_checkout = any(str(self.checkout).startswith(target.rstrip("/") + "/")
                              for target in container.mounts)
        if hidden_checkout:  # e.g. a checkout under /tmp, and the container's own /tmp
            lines.append(bind(str(self.checkout), CHECKOUT_STASH))
        for target, source in sorted(binds.items(), key=lambda b: covers_a_source(b[0])):
            lines.append(bind(str(source), target))
        if hidden_checkout:
            lines.append(bind(CHECKOUT_STASH, str(self.checkout)))
        lines.append(f"cd {shlex.quote(image_config()[1])}")
        # sh adds PWD and OLDPWD; the container's environment is exactly the computed one.
        lines.append('exec /usr/bin/env -u PWD -u OLDPWD "$@"')
        return "\n".join(lines)

    def _namespaced(self, container: ContainerProcess, argv: list[str], label: str) -> list[str]:
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                self._mount_script(container), label, *argv]

    def start(self, container: ContainerProcess) -> None:
        container.log_path.parent.mkdir(parents=True, exist_ok=True)
        for source in container.mounts.values():
            source.mkdir(parents=True, exist_ok=True)
        log = open(container.log_path, "ab")
        container.process = subprocess.Popen(
            self._namespaced(container, container.argv, "container"), env=container.env,
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # fmt: skip
        log.close()

    def exec(self, container: ContainerProcess, argv: list[str], *, stdin: str | None = None,
             timeout: float = 180.0) -> subprocess.CompletedProcess:
        """``argv`` in the container's environment and namespace view (``exec``)."""
        return subprocess.run(self._namespaced(container, argv, "exec"), env=container.env,
                              input=stdin, capture_output=True, text=True, timeout=timeout)

    @staticmethod
    def stop(containers: list[ContainerProcess], grace: float = 15.0) -> None:
        for container in containers:
            if container.running():
                assert container.process is not None
                container.process.terminate()
        for container in containers:
            if container.process is None:
                continue
            try:
                container.process.wait(grace)
            except subprocess.TimeoutExpired:
                container.process.kill()
                container.process.wait()


Upstream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Background:
    """An asyncio loop on a thread of its own, for what runs while a test blocks: TCP
    forwarders (a Service, a published port) and the chart's probes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._servers: list[asyncio.base_events.Server] = []

    def start(self) -> None:
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Runs ``coroutine`` there until it ends or ``stop``."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def listen(self, address: str, port: int,
               connect: Callable[[], Awaitable[Upstream | None]]) -> None:
        """Accepts on ``address:port`` and pipes each connection to what ``connect`` opens
        for it (None, or a refused connection: closed at once)."""
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                upstream = await connect()
            except OSError:
                upstream = None
            if upstream is None:
                writer.close()
                return
            try:
                await _pipe_both_ways(reader, writer, upstream)
            except asyncio.CancelledError:  # stop(): ends quietly, as the loop closes
                writer.close()

        async def serve() -> None:
            self._servers.append(await asyncio.start_server(accepted, address, port))

        self.call(serve())

    def stop(self) -> None:
        """Cancels what runs there (probes, open pipes) and closes the listeners."""
        if not self._thread.is_alive():
            return

        async def close() -> None:
            for server in self._servers:
                server.close()
            running = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            for server in self._servers:
                await server.wait_closed()

        self.call(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


async def _pipe_both_ways(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          upstream: Upstream) -> None:
    upstream_reader, upstream_writer = upstream

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()

    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
