"""Rendered Kubernetes workloads run as local processes: a stand-in for a cluster, so that
the rendered Services, ports, environment, Secret keys, probes and the migrations Job are
shown to agree with each other and with the code (no cluster or container runtime runs on
these machines).

What it does as the kubelet and kube-proxy would (the container side, shared with the
compose runner, is container_processes.py):

- Each container runs with exactly its rendered ``command`` and ``args`` and an environment
  of the image's ``ENV`` (the Dockerfile's runtime stage) plus what the runtime sets
  (``HOSTNAME``, ``HOME``), then ``envFrom`` ConfigMaps, then ``env`` (``value``,
  ``configMapKeyRef``, ``secretKeyRef``), resolved from the rendered ConfigMaps and the
  Secrets the caller creates; a missing Secret or key fails the pod, as
  CreateContainerConfigError does.
- Every pod has a loopback address of its own and every Service a virtual address of its
  own (``127.a.b.n``), with a TCP forwarder to the Service's *ready* endpoints, round
  robin per connection (kube-proxy). A headless Service (``clusterIP: None``) has no
  address and no forwarder: its name resolves to each ready endpoint's address (every
  selected pod's with ``publishNotReadyAddresses``), as the cluster DNS answers.
- Names resolve as in a pod: the private ``/etc/hosts`` of each process maps every Service
  name (``svc``, ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.cluster.local``) to its address,
  or to its ready endpoints' addresses, rewritten in place (one inode, so every
  namespace's bind mount sees it) whenever a pod's readiness changes; a process reads it
  again when it resolves a name again.
- Volumes: each ``emptyDir`` is a fresh directory bind-mounted at its ``mountPath``.
- The hook Job runs first, to completion (``backoffLimit`` retries within
  ``activeDeadlineSeconds``); then every Deployment's pods start at once and are probed
  (startup, then readiness and liveness: ``httpGet`` with the pod address as Host,
  ``grpc`` through the standard health service, ``tcpSocket``) with their periods,
  timeouts and thresholds. Readiness gates the Service endpoints; a failed liveness probe
  restarts the container (counted in ``Pod.restarts``).

What it cannot reproduce, and so substitutes or leaves out:

- A wildcard bind (``bindHost``, ``0.0.0.0``) becomes the pod's address in args and
  environment (the one rewrite of a rendered value besides ``overrides``).
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
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
from container_processes import (
    Background,
    ContainerHost,
    ContainerProcess,
    Upstream,
    address_block,
    bind_to,
    image_config,
)
from deploy_manifests import containers, helm_test_pods, of_kind, pod_labels, pod_template, selects
from grpc_health.v1 import health_pb2, health_pb2_grpc

CLUSTER_DOMAIN = "cluster.local"


class PodConfigError(RuntimeError):
    """The kubelet would not start this container (CreateContainerConfigError)."""


@dataclass(kw_only=True)
class Pod(ContainerProcess):
    workload: dict[str, Any]
    started: bool = False
    ready: bool = False
    restarts: int = 0

    @property
    def container(self) -> dict[str, Any]:
        [container] = containers(self.workload)
        return container

    @property
    def labels(self) -> dict[str, str]:
        return pod_labels(self.workload)


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
        self._addresses = address_block()
        self.services = {s["metadata"]["name"]: (s, None if _headless(s) else next(self._addresses))
                         for s in of_kind(objects, "Service")}
        self.host = ContainerHost(workdir / "hosts", model_dir)
        self.pods: list[Pod] = []
        self.background = Background()
        self._round_robin = itertools.count()

    # --- addresses and names ----------------------------------------------------------

    def _write_hosts(self) -> None:
        ns, domain = self.namespace, CLUSTER_DOMAIN
        names: dict[str, list[str]] = {}
        for name, (service, address) in self.services.items():
            aliases = [name, f"{name}.{ns}", f"{name}.{ns}.svc", f"{name}.{ns}.svc.{domain}"]
            if address is not None:
                names.setdefault(address, []).extend(aliases)
                continue
            every_pod = service["spec"].get("publishNotReadyAddresses", False)
            for pod in self.deployment_pods():
                if ((pod.ready or every_pod)
                        and selects({"matchLabels": service["spec"]["selector"]}, pod.labels)):
                    names.setdefault(pod.address, []).extend(aliases)
        self.host.write_hosts(names)

    def service_address(self, name: str) -> str:
        address = self.services[name][1]
        assert address is not None, f"{name} is headless"
        return address

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
                        service, _ = self.services[backend["name"]]
                        port = _service_port(service, backend["port"])
                        return f"http://{self.service_address(backend['name'])}:{port['port']}"
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
        volumes = {v["name"]: v for v in pod_template(workload)["spec"]["volumes"]}
        mounts = {}
        for mount in container.get("volumeMounts", []):
            assert "emptyDir" in volumes[mount["name"]], mount  # the only kind rendered
            mounts[mount["mountPath"]] = pod_dir / "volumes" / mount["name"]
        return Pod(name=name, workload=workload, address=address, argv=argv, env=env,
                   mounts=mounts, log_path=pod_dir / "log")

    def _bind(self, value: str, address: str) -> str:
        return bind_to(value, address, self.bind_host)

    def _start(self, pod: Pod) -> None:
        self.host.start(pod)
        pod.started = pod.ready = False

    def exec(self, deployment: str, argv: list[str], *, stdin: str | None = None,
             timeout: float = 180.0) -> subprocess.CompletedProcess:
        """``kubectl exec deploy/<deployment> -- argv``: in the first pod's environment and
        namespace view."""
        pod = next(p for p in self.pods if p.workload["metadata"]["name"] == deployment)
        return self.host.exec(pod, argv, stdin=stdin, timeout=timeout)

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

    def run_test_hooks(self, timeout: float = 120.0) -> list[Pod]:
        """`helm test`: each test-hook Pod run to its end (its exit code on the Pod)."""
        ran = []
        for hook in helm_test_pods(self.objects):
            pod = self._pod(hook, 0)
            self.pods.append(pod)
            self._start(pod)
            assert pod.process is not None
            pod.process.wait(timeout=timeout)
            ran.append(pod)
        return ran

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
        # Pods get their addresses first: a headless Service's name resolves to them.
        for deployment in of_kind(self.objects, "Deployment"):
            for index in range(self._replica_count(deployment)):
                self.pods.append(self._pod(deployment, index))
        self._write_hosts()
        self.background.start()
        self._listen()
        self.run_jobs()
        for pod in self.deployment_pods():
            self._start(pod)
            self.background.submit(self._probe(pod))

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

    def _listen(self) -> None:
        for name, (service, address) in self.services.items():
            if address is None:
                continue
            for port in service["spec"]["ports"]:
                self.background.listen(address, port["port"],
                                       lambda n=name, p=port: self._connect(n, p))

    def endpoints(self, service_name: str, port: dict[str, Any]) -> list[tuple[str, int]]:
        service, _ = self.services[service_name]
        found = []
        for pod in self.deployment_pods():
            if pod.ready and selects({"matchLabels": service["spec"]["selector"]}, pod.labels):
                found.append((pod.address, _container_port(pod.container, port["targetPort"])))
        return found

    async def _connect(self, service_name: str, port: dict[str, Any]) -> Upstream | None:
        """An upstream connection to one ready endpoint, round robin (kube-proxy)."""
        endpoints = self.endpoints(service_name, port)
        if not endpoints:
            return None
        host, target = endpoints[next(self._round_robin) % len(endpoints)]
        return await asyncio.open_connection(host, target)

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
            ready = probe is None or await self._check(pod, probe)
            if ready != pod.ready:
                pod.ready = ready
                self._write_hosts()
            # Before the first success, sooner than its period, so a test does not wait a
            # whole period for what the kubelet would see at its next tick.
            period = probe.get("periodSeconds", 10) if probe else 10
            await asyncio.sleep(period if pod.ready else 0.5)
        if pod.ready:
            pod.ready = False
            self._write_hosts()

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
        self.background.stop()
        ContainerHost.stop(self.pods)

    def __enter__(self) -> RenderedCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _headless(service: dict[str, Any]) -> bool:
    return service["spec"].get("clusterIP") == "None"


def _container_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


def _service_port(service: dict[str, Any], port: dict[str, Any]) -> dict[str, Any]:
    key = "name" if "name" in port else "port"
    return next(p for p in service["spec"]["ports"] if p[key] == port[key])
