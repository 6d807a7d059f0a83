"""compose.yaml's services run as local processes: a stand-in for ``docker compose up``, so
that its commands, environment, credentials, published ports, healthchecks and start order
are shown to agree with each other and with the code (no container runtime runs on these
machines). The container side is container_processes.py, shared with the chart runner.

What it does as Compose and the engine would:

- Each VERA service (built from the Dockerfile) runs its ``entrypoint`` + ``command``, or
  the image's ``CMD`` where compose sets none, with the environment the engine gives it:
  the image's ``ENV``, ``HOSTNAME`` and ``HOME``, then each ``env_file`` in order, then
  ``environment``; a missing required env file fails, as compose does.
- ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}``, ``${VAR?error}``,
  ``${VAR:+alt}``, ``$VAR`` and ``$$`` are interpolated as compose does, from the
  environment the caller passes (compose's shell environment).
- Every service has a loopback address of its own, and its name (and container name,
  ``<project>-<service>-1``) resolves to it in each process's ``/etc/hosts``, as the
  engine's DNS does on a shared network.
- ``tmpfs`` paths and named volumes are fresh directories bind-mounted in the process's
  mount namespace (one directory per named volume).
- Published ports: a forwarder on the host address to the container's address and port.
- Start order: a service starts once every ``depends_on`` condition holds
  (``service_started``, ``service_healthy`` by its ``healthcheck`` test run in the
  container's environment and namespace, ``service_completed_successfully``). Until it is
  first healthy a service is checked every second rather than every ``interval``, giving
  up after ``start_period`` + ``interval`` x ``retries``, as the engine would.

What it cannot reproduce, and so substitutes or leaves out:

- Services of other images: the caller passes a substitute for each (an embedded
  PostgreSQL, or nothing where a setting points the code elsewhere).
- Inside a container ``127.0.0.1`` is the container itself; in a healthcheck test it
  becomes the container's address. A wildcard bind (``0.0.0.0``) becomes that address in
  command and environment.
- A published host IP of ``127.0.0.1`` becomes a loopback address of this run's own (other
  sessions share this machine's ``127.0.0.1``), same port.
- Networks (``internal`` has no route out), ``user``, ``read_only``, ``cap_drop``,
  ``security_opt``: every process runs as this user on the machine's network with a
  writable root. A restart policy: a long-running service that exits fails the run.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from container_processes import (
    Background,
    ContainerHost,
    ContainerProcess,
    Upstream,
    address_block,
    bind_to,
    image_cmd,
    image_config,
)
from deploy_manifests import ROOT

COMPOSE = ROOT / "compose.yaml"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
LOOPBACK = "127.0.0.1"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])(.*))?", re.DOTALL)


class ComposeError(RuntimeError):
    """compose would refuse, or the engine would not start, this service."""


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """``value`` (the loaded YAML) with compose's variable syntax replaced from ``env``."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    out, i = [], 0
    while (dollar := value.find("$", i)) >= 0:
        out.append(value[i:dollar])
        rest = value[dollar + 1:]
        if rest.startswith("$"):
            out.append("$")
            i = dollar + 2
        elif rest.startswith("{"):
            end = _closing_brace(value, dollar + 1)
            out.append(_braced(value[dollar + 2:end], env))
            i = end + 1
        elif bare := _NAME.match(rest):
            out.append(env.get(bare[0], ""))
            i = dollar + 1 + bare.end()
        else:
            out.append("$")
            i = dollar + 1
    return "".join(out) + value[i:]


def _closing_brace(text: str, opening: int) -> int:
    depth = 0
    for index in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return index
    raise ComposeError(f"invalid interpolation format: {text[opening - 1:]}")


def _braced(inner: str, env: Mapping[str, str]) -> str:
    """``${inner}``: a name, then optionally ``:-``, ``-``, ``:?``, ``?``, ``:+`` or ``+``
    and a word (itself interpolated)."""
    parsed = _BRACED.fullmatch(inner)
    if parsed is None:
        raise ComposeError(f"invalid interpolation format: ${{{inner}}}")
    name, operator, word = parsed.groups()
    unset = name not in env
    empty = unset or (operator is not None and operator.startswith(":") and not env[name])
    if operator in ("-", ":-"):
        return interpolate(word, env) if empty else env[name]
    if operator in ("?", ":?"):
        if empty:
            raise ComposeError(f"required variable {name} is missing a value: {word}")
        return env[name]
    if operator in ("+", ":+"):
        return "" if empty else interpolate(word, env)
    return env.get(name, "")


def load_compose(env: Mapping[str, str], path: Path = COMPOSE) -> dict[str, Any]:
    """compose.yaml with anchors and merge keys resolved (YAML) and variables interpolated."""
    return interpolate(yaml.safe_load(path.read_text()), env)


def write_documented_credentials(project_dir: Path) -> None:
    """Runs docs/deploy.md's script that writes compose's env files (``.vera-data/compose/``)
    in ``project_dir``, as an operator does before ``docker compose up``."""
    blocks = re.findall(r"```bash\n(.*?)```", DEPLOY_DOC.read_text(), re.DOTALL)
    [script] = [b for b in blocks if "mkdir -p .vera-data/compose" in b]
    written = subprocess.run(["bash", "-e", "-c", script], cwd=project_dir,
                             capture_output=True, text=True, timeout=60)
    if written.returncode != 0:
        raise ComposeError(f"docs/deploy.md's credentials script failed: {written.stderr}")


def stage_project(project_dir: Path, compose: dict[str, Any], checkout: Path = ROOT) -> None:
    """Links into ``project_dir`` what compose.yaml bind-mounts from the checkout
    (``./compose/...``), so that a project directory of the test's own (its env files
    written there) resolves the same relative paths."""
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.partition(":")[0]
            if source.startswith("./"):
                top = Path(source).parts[0]
                if not (project_dir / top).exists():
                    (project_dir / top).symlink_to(checkout / top)


def read_env_file(path: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, blank lines, quoted values); a bare ``KEY``
    takes its value from ``env``."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        if not sep:
            if key in env:
                found[key] = env[key]
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[key.strip()] = value
    return found


def service_environment(service: dict[str, Any], project_dir: Path,
                        env: Mapping[str, str]) -> dict[str, str]:
    """What compose passes a service: its ``env_file`` entries in order, then
    ``environment`` (a mapping or ``KEY=VALUE`` items; a key without a value from ``env``)."""
    found: dict[str, str] = {}
    files = service.get("env_file", [])
    for entry in [files] if isinstance(files, (str, dict)) else files:
        entry = {"path": entry} if isinstance(entry, str) else entry
        path = project_dir / entry["path"]
        if not path.exists():
            if entry.get("required", True):
                raise ComposeError(f"env file {path} not found")
            continue
        found.update(read_env_file(path, env))
    items = service.get("environment", {})
    if isinstance(items, list):
        items = dict(item.partition("=")[::2] if "=" in item else (item, None) for item in items)
    for key, value in items.items():
        if value is None:
            if key in env:
                found[key] = env[key]
        else:
            found[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return found


def runs_the_image(service: dict[str, Any]) -> bool:
    """Built from this repository's Dockerfile (``build: .``)."""
    build = service.get("build")
    context = build if isinstance(build, str) else (build or {}).get("context")
    return context in (".", "./")


def command(service: dict[str, Any]) -> list[str]:
    """``entrypoint`` + ``command`` (a string is shell-split, as compose does), each from
    the image where compose sets none (the Dockerfile sets no ENTRYPOINT)."""
    def words(value: str | list[str] | None) -> list[str] | None:
        return shlex.split(value) if isinstance(value, str) else value

    return [*(words(service.get("entrypoint")) or []),
            *(words(service.get("command")) or image_cmd())]


def published_ports(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host IP, host port, container port) for each published port (short and long
    syntax; no host IP means every interface, here the host address)."""
    found = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            found.append((port.get("host_ip", ""), int(port["published"]), int(port["target"])))
            continue
        parts = str(port).split("/")[0].split(":")
        host_ip = parts[0] if len(parts) == 3 else ""
        found.append((host_ip, int(parts[-2]), int(parts[-1])))
    return found


class Substitute(Protocol):
    """What runs in place of a service whose image cannot run here."""

    def start(self, background: Background, address: str, env: dict[str, str],
              mounts: dict[str, Path]) -> None: ...

    def stop(self) -> None: ...


@dataclass(kw_only=True)
class Container(ContainerProcess):
    service: str
    spec: dict[str, Any]
    healthy: bool = False


class ComposeProject:
    """``docker compose up`` of ``compose`` as processes; a context manager (``down``)."""

    def __init__(
        self,
        compose: dict[str, Any],
        project_dir: Path,
        workdir: Path,
        *,
        substitutes: dict[str, Substitute],
        overrides: dict[str, str] | None = None,
        model_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.compose = compose
        self.project = compose.get("name", project_dir.name)
        self.project_dir = project_dir
        self.workdir = workdir
        self.substitutes = substitutes
        self.overrides = overrides or {}
        self.env = dict(env or {})
        self.services: dict[str, dict[str, Any]] = compose["services"]
        addresses = address_block()
        self.host_address = next(addresses)  # the machine the engine runs on
        self.addresses = {name: next(addresses) for name in self.services}
        self.host = ContainerHost(workdir / "hosts", model_dir)
        self.background = Background()
        self.containers: dict[str, Container] = {}
        self.started: set[str] = set()
        self._substituted: list[Substitute] = []
        for name, service in self.services.items():
            if not runs_the_image(service) and name not in substitutes:
                raise ComposeError(f"{name}: image {service.get('image')} has no substitute")

    # --- containers ---------------------------------------------------------------------

    def container_name(self, service: str) -> str:
        return f"{self.project}-{service}-1"

    def environment(self, service: str) -> dict[str, str]:
        """The service's own environment (env files, then ``environment``)."""
        return service_environment(self.services[service], self.project_dir, self.env)

    def _container(self, name: str) -> Container:
        spec = self.services[name]
        address = self.addresses[name]
        image_env, home = image_config()
        env = {**image_env, "HOSTNAME": self.container_name(name), "HOME": home,
               **self.environment(name)}
        env = {key: bind_to(value, address) for key, value in env.items()}
        env.update(self.overrides)
        directory = self.workdir / "containers" / name
        return Container(name=self.container_name(name), service=name, spec=spec,
                         address=address, env=env, mounts=self._mounts(name),
                         log_path=directory / "log",
                         argv=[bind_to(a, address) for a in command(spec)])

    def _mounts(self, name: str) -> dict[str, Path]:
        """Container path -> host directory: tmpfs paths and named volumes fresh, bind
        mounts (``./path:/target``) from the project directory."""
        spec = self.services[name]
        directory = self.workdir / "containers" / name
        mounts = {path: directory / "tmpfs" / path.strip("/").replace("/", "-")
                  for path in _listed(spec.get("tmpfs"))}
        for volume in spec.get("volumes", []):
            source, _, target = volume.partition(":")
            target = target.split(":")[0]
            if source.startswith((".", "/")):
                mounts[target] = (self.project_dir / source).resolve()
            else:
                mounts[target] = self.workdir / "volumes" / source
        return mounts

    def _start(self, name: str) -> None:
        if name in self.substitutes:
            substitute = self.substitutes[name]
            substitute.start(self.background, self.addresses[name], self.environment(name),
                             self._mounts(name))
            self._substituted.append(substitute)
        else:
            container = self._container(name)
            self.containers[name] = container
            self.host.start(container)
            for host_ip, host_port, target in published_ports(container.spec):
                if host_ip not in ("", LOOPBACK):
                    raise ComposeError(f"{name}: published on {host_ip}")
                self.background.listen(
                    self.host_address, host_port,
                    lambda a=container.address, p=target: _open(a, p))
        self.started.add(name)

    def exec(self, service: str, argv: list[str], *, stdin: str | None = None,
             timeout: float = 180.0) -> subprocess.CompletedProcess:
        """``docker compose exec <service> argv``."""
        return self.host.exec(self.containers[service], argv, stdin=stdin, timeout=timeout)

    def published(self, service: str) -> tuple[str, str]:
        """Where a client on the host reaches the first published port of ``service``: the
        URL here, and the ``HOST:PORT`` it would send as Host (compose's host IP)."""
        host_ip, host_port, _ = published_ports(self.services[service])[0]
        return f"http://{self.host_address}:{host_port}", f"{host_ip or LOOPBACK}:{host_port}"

    # --- up -----------------------------------------------------------------------------

    def up(self, timeout: float) -> None:
        """Starts every service in ``depends_on`` order; returns once all have started
        and every condition another service waits on holds."""
        self.host.write_hosts({address: [name, self.container_name(name)]
                               for name, address in self.addresses.items()})
        self.background.start()
        give_up = time.monotonic() + timeout
        deadlines: dict[str, float] = {}
        while True:
            for name in self.services:
                if name not in self.started and all(
                        self._holds(dep, condition)
                        for dep, condition in _depends_on(self.services[name]).items()):
                    self._start(name)
                    deadlines[name] = time.monotonic() + _health_budget(self.services[name])
            self._check_health(deadlines)
            waited_on = {(dep, condition) for spec in self.services.values()
                         for dep, condition in _depends_on(spec).items()}
            if len(self.started) == len(self.services) and all(
                    self._holds(dep, condition) for dep, condition in waited_on):
                return
            if time.monotonic() > give_up:
                raise ComposeError(f"not up after {timeout} s: started {sorted(self.started)}"
                                   + self.logs())
            time.sleep(1.0)

    def _holds(self, dep: str, condition: str) -> bool:
        if dep not in self.started:
            return False
        container = self.containers.get(dep)
        if condition == "service_completed_successfully":
            assert container is not None and container.process is not None
            code = container.process.poll()
            if code not in (None, 0):
                raise ComposeError(f"{dep} exited {code}" + self.logs(dep))
            return code == 0
        if container is not None and container.process is not None and (
                container.process.poll() is not None):
            raise ComposeError(f"{dep} exited {container.process.returncode}" + self.logs(dep))
        if condition == "service_healthy":
            if container is None:  # a substitute is up once started
                return True
            if "healthcheck" not in container.spec:
                raise ComposeError(f"{dep} has no healthcheck to wait for")
            return container.healthy
        return True

    def _check_health(self, deadlines: dict[str, float]) -> None:
        for name, container in self.containers.items():
            check = container.spec.get("healthcheck")
            if container.healthy or not check or check.get("disable"):
                continue
            test = check["test"]
            if test[0] == "NONE":
                continue
            argv = test[1:] if test[0] == "CMD" else ["/bin/sh", "-c", test[1]]
            argv = [a.replace(LOOPBACK, container.address) for a in argv]
            try:
                result = self.exec(name, argv, timeout=_seconds(check.get("timeout", "30s")))
                container.healthy = result.returncode == 0
            except subprocess.TimeoutExpired:
                container.healthy = False
            if not container.healthy and time.monotonic() > deadlines[name]:
                raise ComposeError(f"{name} is unhealthy" + self.logs(name))

    def logs(self, *names: str) -> str:
        """The tail of each container's log (of ``names``, or all)."""
        return "".join(f"\n--- {c.name}\n{c.log_tail(1500)}"
                       for c in self.containers.values() if not names or c.service in names)

    # --- down ---------------------------------------------------------------------------

    def down(self) -> None:
        self.background.stop()
        ContainerHost.stop(list(self.containers.values()))
        for substitute in reversed(self._substituted):
            substitute.stop()

    def __enter__(self) -> ComposeProject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


async def _open(address: str, port: int) -> Upstream:
    return await asyncio.open_connection(address, port)


def _listed(value: str | list[str] | None) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    """``depends_on`` as service -> condition (the list form means ``service_started``)."""
    depends = service.get("depends_on", {})
    if isinstance(depends, list):
        return dict.fromkeys(depends, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in depends.items()}


def _seconds(duration: str | int | float) -> float:
    """A compose duration (``1m30s``, ``10s``, ``500ms``) in seconds."""
    if isinstance(duration, (int, float)):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(ms|us|h|m|s)", duration))


def _health_budget(service: dict[str, Any]) -> float:
    check = service.get("healthcheck", {})
    return (_seconds(check.get("start_period", "0s"))
            + _seconds(check.get("interval", "30s")) * check.get("retries", 3)
            + _seconds(check.get("timeout", "30s")))
