"""Rendered Kubernetes workloads run as local processes: a stand-in for a cluster, so that
the rendered Services, ports, environment, Secret keys, probes and the migrations Job are
shown to agree with each other and with the code (no cluster or container runtime runs on
these machines).

What it does as the kubelet and kube-proxy would:

- Each container runs with exactly its rendered ``command`` and ``args`` and an environment
  of the image's ``ENV`` (the Dockerfile's runtime stage) plus what the runtime sets
  (``HOSTNAME``, ``HOME``), then ``envFrom`` ConfigMaps, then ``env`` (``value``,
  ``configMapKeyRef``, ``secretKeyRef``), resolved from the rendered ConfigMaps and the
  Secrets the caller creates; a missing Secret or key fails the pod, as
  CreateContainerConfigError does.
- Every pod has a loopback address of its own and every Service a virtual address of its
  own (``127.a.b.n``), with a TCP forwarder to the Service's *ready* endpoints, round
  robin per connection (kube-proxy).
- Names resolve as in a pod: each process runs in a private mount namespace whose
  ``/etc/hosts`` maps every Service name (``svc``, ``svc.ns``, ``svc.ns.svc``,
  ``svc.ns.svc.cluster.local``) to its address, as the kubelet mounts a managed
  ``/etc/hosts`` into each pod. The machine's own ``/etc/hosts`` is never touched.
- Volumes: each ``emptyDir`` is a fresh directory bind-mounted at its ``mountPath`` in that
  namespace, over a tmpfs ``/opt`` holding what the image has there: ``/opt/vera/venv``
  (this checkout's ``.venv``) and the baked model directory (the suite's MiniLM export).
- The hook Job runs first, to completion (``backoffLimit`` retries within
  ``activeDeadlineSeconds``); then every Deployment's pods start at once and are probed
  (startup, then readiness and liveness: ``httpGet`` with the pod address as Host,
  ``grpc`` through the standard health service, ``tcpSocket``) with their periods,
  timeouts and thresholds. Readiness gates the Service endpoints; a failed liveness probe
  restarts the container (counted in ``Pod.restarts``).

What it cannot reproduce, and so substitutes or leaves out:

- A wildcard bind (``bindHost``, ``0.0.0.0``) means the pod's own network namespace; here
  every pod shares the machine's, so in args and environment that value becomes the pod's
  address (the one rewrite of a rendered value besides ``overrides``).
- Replica counts: ``replicas`` caps them (2 CPU cores); an HPA's minimum is the count of an
  autoscaled Deployment.
- A Qdrant server (none installs here): the caller passes the substitute in ``overrides``.
- NetworkPolicy enforcement, resource requests and limits, the security context (the
  processes run as this user, with a writable root filesystem), HPA scaling, PDBs, TLS at
  the Ingress (``ingress_url`` is the backend Service; send the Ingress host as Host),
  image pulls and scheduling.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
from deploy_manifests import ROOT, containers, of_kind, selects
from dockerfile_parse import DockerfileParser
from grpc_health.v1 import health_pb2, health_pb2_grpc

# What the python base image's PATH is before the Dockerfile prepends the venv.
BASE_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGE_VENV = "/opt/vera/venv"
IMAGE_MODELS = "/opt/vera/data/models"
CLUSTER_DOMAIN = "cluster.local"


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


class PodConfigError(RuntimeError):
    """The kubelet would not start this container (CreateContainerConfigError)."""


@dataclass
class Pod:
    name: str
    workload: dict[str, Any]
    address: str
    argv: list[str]
    env: dict[str, str]
    mounts: dict[str, Path]
    log_path: Path
    process: subprocess.Popen | None = None
    started: bool = False
    ready: bool = False
    restarts: int = 0

    @property
    def container(self) -> dict[str, Any]:
        [container] = containers(self.workload)
        return container

    @property
    def labels(self) -> dict[str, str]:
        return self.workload["spec"]["template"]["metadata"]["labels"]

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


class RenderedCluster:
    """The workloads of ``objects`` as processes; use as a context manager (stops them)."""

    def __init__(
        self,
        objects: list[dict[str, Any]],
        secrets: dict[str, dict[str, str]],
        workdir: Path,
        *,
        namespace: str,
        bind_host: str = "0.0.0.0",
        replicas: dict[str, int] | None = None,
        default_replicas: int = 1,
        overrides: dict[str, str] | None = None,
        model_dir: Path | None = None,
    ) -> None:
        self.objects = objects
        self.secrets = secrets
        self.workdir = workdir
        self.namespace = namespace
        self.bind_host = bind_host
        self.replicas = replicas or {}
        self.default_replicas = default_replicas
        self.overrides = overrides or {}
        self.model_dir = model_dir
        self.configmaps = {c["metadata"]["name"]: c.get("data", {})
                           for c in of_kind(objects, "ConfigMap")}
        self._addresses = self._address_block()
        self.services = {s["metadata"]["name"]: (s, next(self._addresses))
                         for s in of_kind(objects, "Service")}
        self.hosts_file = workdir / "hosts"
        self.pods: list[Pod] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._servers: list[asyncio.base_events.Server] = []
        self._probes: list[asyncio.Future] = []
        self._round_robin = itertools.count()

    # --- addresses and names ----------------------------------------------------------

    @staticmethod
    def _address_block() -> Iterator[str]:
        """Loopback addresses nobody else on this machine is likely to use (127.a.b.n)."""
        a, b = random.randrange(1, 255), random.randrange(1, 255)
        return (f"127.{a}.{b}.{n}" for n in range(1, 255))

    def _write_hosts(self) -> None:
        lines = ["127.0.0.1 localhost"]
        for name, (_, address) in self.services.items():
            ns, domain = self.namespace, CLUSTER_DOMAIN
            lines.append(f"{address} {name} {name}.{ns} {name}.{ns}.svc {name}.{ns}.svc.{domain}")
        self.hosts_file.write_text("\n".join(lines) + "\n")

    def service_address(self, name: str) -> str:
        return self.services[name][1]

    def ingress_url(self, host: str) -> str:
        """The backend of the Ingress rule for ``host`` at path ``/`` (no TLS, no controller:
        send ``host`` as the Host header)."""
        for ingress in of_kind(self.objects, "Ingress"):
            for rule in ingress["spec"]["rules"]:
                if rule.get("host") != host:
                    continue
                for path in rule["http"]["paths"]:
                    if path["path"] == "/":
                        backend = path["backend"]["service"]
                        service, address = self.services[backend["name"]]
                        port = _service_port(service, backend["port"])
                        return f"http://{address}:{port['port']}"
        raise KeyError(host)

    # --- pods -------------------------------------------------------------------------

    def _env(self, container: dict[str, Any], pod_name: str) -> dict[str, str]:
        image_env, workdir = image_config()
        env = {**image_env, "HOSTNAME": pod_name, "HOME": workdir}
        for source in container.get("envFrom", []):
            ref = source["configMapRef"]
            if ref["name"] not in self.configmaps:
                raise PodConfigError(f"configmap {ref['name']} not found")
            env.update(self.configmaps[ref["name"]])
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = str(item["value"])
                continue
            source = item["valueFrom"]
            if "secretKeyRef" in source:
                ref, store, kind = source["secretKeyRef"], self.secrets, "secret"
            else:
                ref, store, kind = source["configMapKeyRef"], self.configmaps, "configmap"
            if ref["key"] not in store.get(ref["name"], {}):
                raise PodConfigError(f"{kind} {ref['name']} has no key {ref['key']}")
            env[item["name"]] = store[ref["name"]][ref["key"]]
        return env

    def _pod(self, workload: dict[str, Any], index: int) -> Pod:
        name = f"{workload['metadata']['name']}-{index}"
        [container] = containers(workload)
        address = next(self._addresses)
        pod_dir = self.workdir / "pods" / name
        argv = [self._bind(a, address) for a in
                [*container.get("command", []), *container.get("args", [])]]
        env = {k: self._bind(v, address) for k, v in self._env(container, name).items()}
        env.update(self.overrides)
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        mounts = {}
        for mount in container.get("volumeMounts", []):
            assert "emptyDir" in volumes[mount["name"]], mount  # the only kind rendered
            mounts[mount["mountPath"]] = pod_dir / "volumes" / mount["name"]
            mounts[mount["mountPath"]].mkdir(parents=True, exist_ok=True)
        return Pod(name, workload, address, argv, env, mounts, pod_dir / "log")

    def _bind(self, value: str, address: str) -> str:
        if value == self.bind_host:
            return address
        if value.startswith(self.bind_host + ":"):
            return address + value[len(self.bind_host):]
        return value

    def _mount_script(self, pod: Pod) -> str:
        binds = {IMAGE_VENV: ROOT / ".venv", **pod.mounts}
        if self.model_dir is not None:
            binds[IMAGE_MODELS] = self.model_dir
        lines = ["set -e", f"mount --bind {shlex.quote(str(self.hosts_file))} /etc/hosts",
                 "mount -t tmpfs vera-image /opt"]
        sources = [str(source) for source in binds.values()]

        def covers_a_source(target: str) -> bool:  # e.g. the pod's /tmp over our workdir
            return any(source.startswith(target.rstrip("/") + "/") for source in sources)

        for target, source in sorted(binds.items(), key=lambda b: covers_a_source(b[0])):
            quoted = shlex.quote(target)
            lines.append(f"mkdir -p {quoted} && mount --bind {shlex.quote(str(source))} {quoted}")
        lines.append(f"cd {shlex.quote(image_config()[1])}")
        # sh adds PWD and OLDPWD; the container's environment is exactly the pod's.
        lines.append('exec /usr/bin/env -u PWD -u OLDPWD "$@"')
        return "\n".join(lines)

    def _start(self, pod: Pod) -> None:
        pod.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(pod.log_path, "ab")
        pod.process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             self._mount_script(pod), "pod", *pod.argv],
            env=pod.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # fmt: skip
        log.close()
        pod.started = pod.ready = False

    def exec(self, deployment: str, argv: list[str], *, stdin: str | None = None,
             timeout: float = 180.0) -> subprocess.CompletedProcess:
        """``kubectl exec deploy/<deployment> -- argv``: in the first pod's environment and
        namespace view."""
        pod = next(p for p in self.pods if p.workload["metadata"]["name"] == deployment)
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             self._mount_script(pod), "exec", *argv],
            env=pod.env, input=stdin, capture_output=True, text=True, timeout=timeout)  # fmt: skip

    # --- the hook Job -------------------------------------------------------------------

    def run_jobs(self) -> None:
        for job in of_kind(self.objects, "Job"):
            spec = job["spec"]
            deadline = time.monotonic() + spec.get("activeDeadlineSeconds", 600)
            for attempt in range(spec.get("backoffLimit", 6) + 1):
                pod = self._pod(job, attempt)
                self.pods.append(pod)
                self._start(pod)
                assert pod.process is not None
                code = pod.process.wait(timeout=max(1.0, deadline - time.monotonic()))
                if code == 0:
                    break
            else:
                raise AssertionError(f"job {job['metadata']['name']} failed:\n{pod.log_tail()}")

    # --- Deployments, Services, probes ---------------------------------------------------

    def _replica_count(self, deployment: dict[str, Any]) -> int:
        name = deployment["metadata"]["name"]
        wanted = deployment["spec"].get("replicas")
        if wanted is None:  # an HPA owns the count: start at its minimum
            [hpa] = [h for h in of_kind(self.objects, "HorizontalPodAutoscaler")
                     if h["spec"]["scaleTargetRef"]["name"] == name]
            wanted = hpa["spec"]["minReplicas"]
        cap = next((n for key, n in self.replicas.items() if name.endswith("-" + key)),
                   self.default_replicas)
        return min(wanted, cap)

    def start(self) -> None:
        self._write_hosts()
        self._thread.start()
        self._call(self._listen())
        self.run_jobs()
        for deployment in of_kind(self.objects, "Deployment"):
            for index in range(self._replica_count(deployment)):
                pod = self._pod(deployment, index)
                self.pods.append(pod)
                self._start(pod)
                self._probes.append(asyncio.run_coroutine_threadsafe(self._probe(pod), self._loop))

    def deployment_pods(self) -> list[Pod]:
        return [p for p in self.pods if p.workload["kind"] == "Deployment"]

    def wait_ready(self, timeout: float) -> None:
        give_up = time.monotonic() + timeout
        while not all(p.ready for p in self.deployment_pods()):
            for pod in self.deployment_pods():
                if pod.restarts:
                    raise AssertionError(f"{pod.name} was restarted:\n{pod.log_tail()}")
            if time.monotonic() > give_up:
                waiting = [p.name for p in self.deployment_pods() if not p.ready]
                raise AssertionError(f"not Ready after {timeout} s: {waiting}\n" + "\n".join(
                    f"--- {p.name}\n{p.log_tail(1500)}" for p in self.deployment_pods()
                    if not p.ready))
            time.sleep(0.5)

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    async def _listen(self) -> None:
        for name, (service, address) in self.services.items():
            for port in service["spec"]["ports"]:
                server = await asyncio.start_server(
                    lambda r, w, n=name, p=port: self._forward(r, w, n, p), address, port["port"])
                self._servers.append(server)

    def endpoints(self, service_name: str, port: dict[str, Any]) -> list[tuple[str, int]]:
        service, _ = self.services[service_name]
        found = []
        for pod in self.deployment_pods():
            if pod.ready and selects({"matchLabels": service["spec"]["selector"]}, pod.labels):
                found.append((pod.address, _container_port(pod.container, port["targetPort"])))
        return found

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       service_name: str, port: dict[str, Any]) -> None:
        endpoints = self.endpoints(service_name, port)
        if not endpoints:
            writer.close()
            return
        host, target = endpoints[next(self._round_robin) % len(endpoints)]
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, target)
        except OSError:
            writer.close()
            return

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

    async def _probe(self, pod: Pod) -> None:
        """The kubelet's probe workers for one container: startup until it succeeds, then
        readiness and liveness, each at its own period."""
        container = pod.container
        while True:
            if pod.process is None or pod.process.poll() is not None:  # restartPolicy Always
                await asyncio.sleep(1.0)
                await asyncio.to_thread(self._restart, pod)
            generation = pod.restarts
            if not await self._until_started(pod, container.get("startupProbe")):
                continue
            workers = [self._readiness(pod, container.get("readinessProbe"), generation),
                       self._liveness(pod, container.get("livenessProbe"), generation)]
            await asyncio.gather(*workers)

    def _running(self, pod: Pod, generation: int) -> bool:
        return (pod.restarts == generation and pod.process is not None
                and pod.process.poll() is None)

    async def _until_started(self, pod: Pod, probe: dict[str, Any] | None) -> bool:
        """True once started; False after a restart (the failure threshold was reached)."""
        failures = 0
        while probe is not None:
            if await self._check(pod, probe):
                break
            failures += 1
            if failures >= probe.get("failureThreshold", 3):
                await asyncio.to_thread(self._restart, pod)
                return False
            await asyncio.sleep(probe.get("periodSeconds", 10))
        pod.started = True
        return True

    async def _readiness(self, pod: Pod, probe: dict[str, Any] | None, generation: int) -> None:
        while self._running(pod, generation):
            pod.ready = probe is None or await self._check(pod, probe)
            # Before the first success, sooner than its period, so a test does not wait a
            # whole period for what the kubelet would see at its next tick.
            period = probe.get("periodSeconds", 10) if probe else 10
            await asyncio.sleep(period if pod.ready else 0.5)
        pod.ready = False

    async def _liveness(self, pod: Pod, probe: dict[str, Any] | None, generation: int) -> None:
        failures = 0
        while probe is not None and self._running(pod, generation):
            await asyncio.sleep(probe.get("periodSeconds", 10))
            if not self._running(pod, generation):
                return
            failures = 0 if await self._check(pod, probe) else failures + 1
            if failures >= probe.get("failureThreshold", 3):
                await asyncio.to_thread(self._restart, pod)
                return

    def _restart(self, pod: Pod) -> None:
        assert pod.process is not None
        if pod.process.poll() is None:
            pod.log_path.open("a").write("\n[runner] restarting: probe failure threshold\n")
        pod.process.terminate()
        try:
            pod.process.wait(10)
        except subprocess.TimeoutExpired:
            pod.process.kill()
            pod.process.wait()
        pod.restarts += 1
        self._start(pod)

    async def _check(self, pod: Pod, probe: dict[str, Any]) -> bool:
        timeout = probe.get("timeoutSeconds", 1)
        try:
            if "httpGet" in probe:
                action = probe["httpGet"]
                port = _container_port(pod.container, action["port"])
                async with httpx.AsyncClient(timeout=timeout) as client:
                    response = await client.get(f"http://{pod.address}:{port}{action['path']}")
                return 200 <= response.status_code < 400
            if "grpc" in probe:
                action = probe["grpc"]
                async with grpc.aio.insecure_channel(f"{pod.address}:{action['port']}") as channel:
                    reply = await health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(service=action.get("service", "")),
                        timeout=timeout)
                return reply.status == health_pb2.HealthCheckResponse.SERVING
            if "tcpSocket" in probe:
                port = _container_port(pod.container, probe["tcpSocket"]["port"])
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(pod.address, port), timeout)
                writer.close()
                return True
        except (TimeoutError, OSError, httpx.HTTPError, grpc.aio.AioRpcError):
            return False
        raise AssertionError(f"unknown probe {probe}")

    # --- stop ---------------------------------------------------------------------------

    def stop(self) -> None:
        for future in self._probes:
            future.cancel()
        for pod in self.pods:
            if pod.process is not None and pod.process.poll() is None:
                pod.process.terminate()
        for pod in self.pods:
            if pod.process is None:
                continue
            try:
                pod.process.wait(15)
            except subprocess.TimeoutExpired:
                pod.process.kill()
                pod.process.wait()
        if self._thread.is_alive():
            async def close() -> None:
                for server in self._servers:
                    server.close()
            self._call(close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> RenderedCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _container_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


def _service_port(service: dict[str, Any], port: dict[str, Any]) -> dict[str, Any]:
    key = "name" if "name" in port else "port"
    return next(p for p in service["spec"]["ports"] if p[key] == port[key])
