"""The Helm chart, linted and rendered offline with several value sets, checked as data.

No cluster exists here: Helm's own engine (helm-python-sdk) renders and lints, and
kubernetes-validate checks every object against the API schemas of a current Kubernetes.
"""

from __future__ import annotations

import helm_python
import kubernetes_validate
import pytest
import yaml
from deploy_manifests import (
    CHART,
    KUBE_VERSION,
    ROOT,
    SECRET_VARIABLES,
    SERVICE_DSNS,
    VALUE_SETS,
    by_component,
    component,
    containers,
    helm_test_pods,
    manifests,
    of_kind,
    pod_labels,
    pod_template,
    render_files,
    rendered,
    selects,
    service_logins,
    value_set,
    workloads,
)

from vera.commands import SERVICE_NAMES
from vera.config import Settings, load_settings
from vera.entrypoints.loopback import refuse_unauthenticated_non_loopback
from vera.entrypoints.mcp.main import check_startup
from vera.rpc.auth import server_auth_key
from vera.services.retrieval import server as retrieval_server

GRPC = ("identity", "knowledge", "retrieval", "snapshot")
FRONTS = ("gateway", "api")
SINGLETONS = ("knowledge-maintenance", "snapshot-maintenance")
CRD_GROUPS = ("monitoring.coreos.com/",)  # PodMonitor: validated by its operator, not here




# --- lint ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*VALUE_SETS, "dev"])
def test_the_chart_lints_strictly_clean(name) -> None:
    report = helm_python.lint(
        str(CHART), value_set(name), strict=True, kube_version=f"v{KUBE_VERSION}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [] and problems == []


def test_installing_from_a_checkout_needs_no_fetch() -> None:
    """`helm install` wants every declared dependency's chart on disk (else it asks for
    `helm dependency build`, a network fetch): the chart declares none."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert "dependencies" not in chart and not (CHART / "Chart.lock").exists()
    assert not (CHART / "charts").exists()
    assert not (CHART / "requirements.yaml").exists()  # the Helm 2 spelling of the same


@pytest.mark.parametrize("name", [*VALUE_SETS, "dev"])
def test_turning_on_a_bundled_qdrant_fails_naming_the_value(name) -> None:
    values = {**value_set(name), "qdrant": {"enabled": True}}
    with pytest.raises(helm_python.HelmValuesError, match="/qdrant/enabled"):
        manifests(values)


def test_retrieval_without_a_qdrant_url_fails_naming_the_value() -> None:
    with pytest.raises(helm_python.HelmValuesError, match="/vectorStore/url"):
        manifests({"vectorStore": {"url": ""}})


@pytest.mark.parametrize("name", [*VALUE_SETS, "dev"])
def test_retrieval_points_at_a_qdrant_that_is_documented_or_shipped(name) -> None:
    """No value set may wire retrieval to a Qdrant nobody installs: the official chart's
    release "qdrant" (docs/deploy.md), the Tiltfile's charts/dev/qdrant.yaml (the same
    Service name), or an external URL the value set names itself."""
    [config] = of_kind(rendered(name), "ConfigMap")
    url = config["data"]["VERA_RETRIEVAL__QDRANT_URL"]
    own = value_set(name).get("vectorStore", {}).get("url")
    assert url == (own or "http://qdrant:6333")
    dev_services = {
        f"http://{d['metadata']['name']}:{port['port']}"
        for d in yaml.safe_load_all((CHART.parent / "dev" / "qdrant.yaml").read_text())
        if d and d["kind"] == "Service" for port in d["spec"]["ports"]
    }
    assert "http://qdrant:6333" in dev_services
    assert "http://qdrant:6333" in (ROOT / "docs" / "deploy.md").read_text()


VALID_QUANTITIES = ["1", "0", "250m", "1.5", "0.5", ".5", "1.", "+2", "1.5Gi", "2G", "128Mi",
                    "100Ki", "1Ti", "1Pi", "1Ei", "500M", "1k", "1e3", "1E3", "2e-3", "100n",
                    "100u", 2, 0.25, 1073741824]
INVALID_QUANTITIES = ["", "-1", "1.5gi", "2GB", "1 Gi", "Gi", "1Gib", "1KI", "0x10", "1,5",
                      "1K", "m", "1e", "1.5.Gi", "one", -1]


@pytest.mark.parametrize("quantity", VALID_QUANTITIES)
def test_the_schema_accepts_a_valid_kubernetes_quantity(quantity) -> None:
    resources = {"requests": {"cpu": quantity, "memory": quantity},
                 "limits": {"cpu": quantity, "memory": quantity}}
    [api] = [w for w in workloads(manifests({"api": {"resources": resources}}))
             if component(w) == "api"]
    assert containers(api)[0]["resources"]["limits"]["memory"] == quantity


@pytest.mark.parametrize("quantity", INVALID_QUANTITIES)
@pytest.mark.parametrize("field", ["cpu", "memory"])
def test_the_schema_refuses_an_invalid_quantity_naming_the_field(quantity, field) -> None:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"},
                 "limits": {"cpu": "1", "memory": "1Gi"}}
    resources["limits"][field] = quantity
    with pytest.raises(helm_python.HelmValuesError, match=f"/api/resources/limits/{field}"):
        manifests({"api": {"resources": resources}})



# --- every object is valid Kubernetes ---------------------------------------------------


@pytest.mark.parametrize("name", [*VALUE_SETS, "dev"])
def test_every_rendered_object_validates_against_kubernetes(name) -> None:
    for obj in rendered(name):
        if obj["apiVersion"].startswith(CRD_GROUPS):
            continue
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


# --- metrics ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_metrics_port_is_declared_on_every_serving_pod_and_on_no_service(name) -> None:
    """The gateway's listener and each gRPC service's (maintenance singletons included):
    on the pod, reachable by the scrapers' NetworkPolicy, never on a Service."""
    objects = rendered(name)
    metrics_port = 9101
    for service in of_kind(objects, "Service"):
        for port in service["spec"]["ports"]:
            assert metrics_port not in (port["port"], port.get("targetPort"))
            assert port.get("targetPort") != "metrics" and port.get("name") != "metrics"
    deployments = by_component(objects, "Deployment")
    for name_ in ("gateway", *GRPC, *(s for s in SINGLETONS if s in deployments)):
        [container] = containers(deployments[name_])
        assert {"name": "metrics", "containerPort": metrics_port, "protocol": "TCP"} in (
            container["ports"]
        ), name_
        env = _container_env(objects, deployments[name_])
        variable = "MCP" if name_ == "gateway" else "SERVICE"
        assert env[f"VERA_OBSERVABILITY__{variable}_METRICS_PORT"] == str(metrics_port)
        assert _settings_from(env).observability.service_metrics_port == metrics_port
    policies = of_kind(objects, "NetworkPolicy")
    if policies:
        scrape = [
            rule for policy in policies for rule in policy["spec"].get("ingress", [])
            if {"port": metrics_port, "protocol": "TCP"} in rule.get("ports", [])
        ]
        assert scrape and all(rule.get("from") for rule in scrape)
        for deployment in deployments.values():
            if any(p.get("name") == "metrics" for p in containers(deployment)[0]["ports"]):
                assert any(
                    selects(policy["spec"]["podSelector"], pod_labels(deployment)) and any(
                        rule in scrape for rule in policy["spec"].get("ingress", []))
                    for policy in policies
                ), component(deployment)


def test_tracing_is_off_by_default_and_every_pod_exports_when_an_endpoint_is_set() -> None:
    for deployment in of_kind(rendered("default"), "Deployment"):
        env = _container_env(rendered("default"), deployment)
        assert not any(name.startswith("OTEL_") for name in env), component(deployment)
    endpoint = "http://otel-collector.monitoring:4318"
    objects = manifests({"tracing": {"endpoint": endpoint, "collectorPeers": [
        {"namespaceSelector": {"matchLabels": {"vera.dev/monitoring": "true"}}}]}})
    [egress] = [p for p in of_kind(objects, "NetworkPolicy")
                if p["metadata"]["name"].endswith("-tracing-egress")]
    assert egress["spec"]["egress"][0]["ports"] == [{"port": 4318, "protocol": "TCP"}]
    for deployment in of_kind(objects, "Deployment"):
        env = _container_env(objects, deployment)
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint
        assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
        assert selects(egress["spec"]["podSelector"], pod_labels(deployment))


def test_the_pod_monitor_scrapes_every_pod_of_the_release() -> None:
    objects = manifests({"metrics": {"podMonitor": {"enabled": True}}})
    [monitor] = of_kind(objects, "PodMonitor")
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    for deployment in of_kind(objects, "Deployment"):
        assert selects(monitor["spec"]["selector"], pod_labels(deployment)), component(deployment)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_ingress_routes_only_to_the_gateway_and_the_api(name) -> None:
    objects = rendered(name)
    services = {s["metadata"]["name"]: s for s in of_kind(objects, "Service")}
    for ingress in of_kind(objects, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                assert component(services[backend["name"]]) in FRONTS
                assert backend["port"] == {"name": "http"}
    # No NodePort or LoadBalancer: ClusterIP is also the type of a headless Service.
    assert all(s["spec"].get("type", "ClusterIP") == "ClusterIP" for s in services.values())


# --- pods -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_deployment_container_has_probes_of_its_kind(name) -> None:
    for deployment in of_kind(rendered(name), "Deployment"):
        for container in containers(deployment):
            for probe in ("readinessProbe", "livenessProbe"):
                kind = "httpGet" if component(deployment) in FRONTS else "grpc"
                assert kind in container[probe], (component(deployment), probe)
            if component(deployment) not in FRONTS:
                assert container["startupProbe"]["grpc"]["port"] == container["ports"][0][
                    "containerPort"
                ]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_container_has_limits_and_a_locked_down_security_context(name) -> None:
    objects = rendered(name)
    for workload in [*workloads(objects), *helm_test_pods(objects)]:
        pod = pod_template(workload)["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for container in containers(workload):
            for bound in ("requests", "limits"):
                assert set(container["resources"][bound]) == {"cpu", "memory"}
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["runAsNonRoot"] is True
            assert security["capabilities"] == {"drop": ["ALL"]}


def test_requests_cover_the_measured_peak_rss() -> None:
    # docs/benchmarks.md, Scale: peak RSS at 10k facts (MiB); a request below it evicts at rest.
    peak_mib = {"retrieval": 490, "knowledge": 129, "gateway": 96, "api": 69,
                "identity": 64, "snapshot": 65,
                **{f"migrations-{svc}": 69 for svc in GRPC}}
    deployments = {component(w): w for w in workloads(rendered("default"))}
    for name, peak in peak_mib.items():
        [container] = containers(deployments[name])
        request = container["resources"]["requests"]["memory"]
        limit = container["resources"]["limits"]["memory"]
        assert _mebibytes(request) >= peak and _mebibytes(limit) >= 1.2 * _mebibytes(request)
    [retrieval] = containers(deployments["retrieval"])
    assert _mebibytes(retrieval["resources"]["limits"]["memory"]) >= 1.5 * 899  # 100k peak


@pytest.mark.parametrize("name", VALUE_SETS)
def test_only_retrieval_writes_beyond_tmp_and_there_only_its_memory_snapshot(name) -> None:
    """The root filesystem is read-only: retrieval's pods mount a volume where the service
    writes its memory snapshot (VERA_DATA_DIR/memory), and no other pod mounts one (or
    holds the key that signs its shared copy)."""
    objects = rendered(name)
    for workload in workloads(objects):
        pod = workload["spec"]["template"]["spec"]
        [container] = containers(workload)
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert set(mounts) == set(volumes), component(workload)
        env = _container_env(objects, workload)
        if component(workload) != "retrieval":
            assert mounts == {"tmp": "/tmp"}, component(workload)
            # The key whose signature makes retrieval unpickle a shared snapshot.
            assert "VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY" not in env, component(workload)
            continue
        settings = _settings_from(env)
        snapshot = settings.data_dir / retrieval_server.MEMORY_SNAPSHOT
        assert mounts["memory"] == str(snapshot.parent)
        assert _mebibytes(volumes["memory"]["emptyDir"]["sizeLimit"]) >= 1024
        # A new pod's volume is empty: it copies the writer's snapshot from the database,
        # whose MAC key the pod has.
        assert settings.retrieval.share_memory_snapshot
        assert retrieval_server._shared_snapshot(settings, None) is not None


def test_without_sharing_no_pod_gets_the_signing_key() -> None:
    objects = manifests({"retrieval": {"shareMemorySnapshot": False}})
    [retrieval] = [w for w in workloads(objects) if component(w) == "retrieval"]
    env = _container_env(objects, retrieval)
    assert "VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY" not in env
    assert not _settings_from(env).retrieval.share_memory_snapshot


def test_the_config_checksum_follows_the_config() -> None:
    def checksums(values):
        return {
            component(d): d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for d in of_kind(manifests(values), "Deployment")
        }

    before, after = checksums({}), checksums({"logLevel": "DEBUG"})
    assert set(before) == set(after) and all(before[c] != after[c] for c in before)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_container_runs_a_command_the_test_suite_runs(name) -> None:
    for workload in workloads(rendered(name)):
        [container] = containers(workload)
        command = container["command"]
        if command[:2] == ["vera", "serve"]:
            assert command[2] in SERVICE_NAMES and command[3] == "--address"
        else:
            assert command in (
                ["python", "-m", "vera.entrypoints.mcp.main"],
                ["python", "-m", "vera.entrypoints.api.main"],
                ["vera", "migrate"],
                *(["vera", "migrate", service] for service in SERVICE_NAMES),
            )


@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_test_runs_the_release_check_from_outside_every_policy(name) -> None:
    """`helm test`'s pod (tests/deploy/test_rendered_chart_runs.py runs it): the release
    check, from a pod no NetworkPolicy selects (so the policies treat it as any other pod),
    asked to find every gRPC Service unreachable when the chart's policies are on."""
    objects = rendered(name)
    [hook] = helm_test_pods(objects)
    policies = of_kind(objects, "NetworkPolicy")
    assert not any(selects(p["spec"]["podSelector"], pod_labels(hook)) for p in policies)
    [container] = containers(hook)
    command = container["command"]
    assert command[:3] == ["python", "-m", "vera.entrypoints.release_check"]
    isolated = [command[i + 1] for i, arg in enumerate(command) if arg == "--isolated"]
    services = {component(s): s for s in of_kind(objects, "Service")
                if s["spec"].get("clusterIP") != "None"}
    expected = [f"{s['metadata']['name']}:{s['spec']['ports'][0]['port']}"
                for name_, s in sorted(services.items()) if name_ in SERVICE_NAMES]
    enforced = value_set(name).get("networkPolicy", {}).get("enabled", True)
    assert sorted(isolated) == (sorted(expected) if enforced else [])


# --- components ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_each_component_has_a_deployment_and_a_service_on_its_port(name) -> None:
    """A gRPC component has two Services on its port: a ClusterIP one (load tests,
    port-forwards) and a headless one that internal callers dial as `dns:///`, which lists
    every replica (ready or not: callers watch each one's gRPC health), so a caller's
    round_robin channel spreads its calls over them."""
    objects = rendered(name)
    deployments = by_component(objects, "Deployment")
    services = of_kind(objects, "Service")
    headless = {component(s): s for s in services if s["spec"].get("clusterIP") == "None"}
    cluster_ip = {component(s): s for s in services if s["spec"].get("clusterIP") != "None"}
    assert set(deployments) == {*FRONTS, *GRPC, *SINGLETONS}
    assert set(cluster_ip) == {*FRONTS, *GRPC}  # the singletons take no requests
    assert set(headless) == set(GRPC)
    env = _container_env(objects, deployments["gateway"])
    for svc in GRPC:
        for service in (cluster_ip[svc], headless[svc]):
            [port] = service["spec"]["ports"]
            assert port["port"] == int(env[f"VERA_SERVICES__{svc.upper()}"].rsplit(":", 1)[1])
            assert selects({"matchLabels": service["spec"]["selector"]},
                           pod_labels(deployments[svc]))
            for singleton in SINGLETONS:
                labels = pod_labels(deployments[singleton])
                assert not selects({"matchLabels": service["spec"]["selector"]}, labels)
        assert headless[svc]["spec"]["publishNotReadyAddresses"] is True
        [port] = headless[svc]["spec"]["ports"]
        assert env[f"VERA_SERVICES__{svc.upper()}"] == (
            f"dns:///{headless[svc]['metadata']['name']}:{port['port']}")


@pytest.mark.parametrize("name", VALUE_SETS)
def test_background_work_runs_in_exactly_one_pod(name) -> None:
    objects = rendered(name)
    deployments = by_component(objects, "Deployment")

    def env_of(component_name):
        return _container_env(objects, deployments[component_name])

    assert env_of("knowledge")["VERA_KNOWLEDGE__COMMUNITY_REFRESH_SECONDS"] == "0"
    assert env_of("snapshot")["VERA_SNAPSHOT__SWEEP_INTERVAL_SECONDS"] == "0"
    assert float(env_of("knowledge-maintenance")["VERA_KNOWLEDGE__COMMUNITY_REFRESH_SECONDS"]) > 0
    assert float(env_of("snapshot-maintenance")["VERA_SNAPSHOT__SWEEP_INTERVAL_SECONDS"]) > 0
    for singleton in SINGLETONS:
        spec = deployments[singleton]["spec"]
        assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    # Retrieval elects its one index writer itself (a PostgreSQL advisory lock), so its
    # replicas roll like any other: old and new pods may overlap.
    retrieval = deployments["retrieval"]["spec"]
    wanted = value_set(name).get("retrieval", {}).get("replicas", 2)
    assert retrieval["replicas"] == wanted and "strategy" not in retrieval
    # The settings the chart sets are real ones: they parse into vera's Settings.
    for singleton in (*SINGLETONS, "knowledge", "snapshot"):
        _settings_from(env_of(singleton))


def test_a_misspelt_value_is_refused_naming_it() -> None:
    with pytest.raises(helm_python.HelmValuesError, match="gatewy"):
        manifests({"gatewy": {"replicas": 3}})


def test_retrieval_refuses_fewer_than_one_replica_naming_the_field() -> None:
    with pytest.raises(helm_python.HelmValuesError, match="/retrieval/replicas"):
        manifests({"retrieval": {"replicas": 0}})


@pytest.mark.parametrize("name", VALUE_SETS)
def test_migrations_run_once_per_release_as_a_hook_before_the_services(name) -> None:
    """One Job migrating every schema with the shared login, or one per service migrating
    its own schema with its own (database.serviceDsnSecrets)."""
    objects = rendered(name)
    commands = []
    for job in of_kind(objects, "Job"):
        annotations = job["metadata"]["annotations"]
        assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
        [container] = containers(job)
        # A hook runs before the release's ConfigMap exists: the Job must not read it.
        assert "envFrom" not in container
        commands.append(container["command"])
    if service_logins(name):
        assert sorted(commands) == [["vera", "migrate", svc] for svc in GRPC]
    else:
        assert commands == [["vera", "migrate"]]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_gateway_is_autoscaled_and_protected_from_disruption(name) -> None:
    objects = rendered(name)
    gateway = by_component(objects, "Deployment")["gateway"]
    hpas = by_component(objects, "HorizontalPodAutoscaler")
    pdbs = by_component(objects, "PodDisruptionBudget")
    if value_set(name).get("gateway", {}).get("autoscaling", {}).get("enabled", True):
        assert hpas["gateway"]["spec"]["scaleTargetRef"]["name"] == gateway["metadata"]["name"]
        assert "replicas" not in gateway["spec"]  # the HPA owns the count
        assert selects(pdbs["gateway"]["spec"]["selector"], pod_labels(gateway))
    assert set(hpas) <= {"gateway"} and set(pdbs) <= {"gateway"}


# --- network policies ---------------------------------------------------------------------


def _scrape_only(rule: dict, objects: list[dict]) -> bool:
    """An ingress rule that opens the metrics port alone (Prometheus's scrapes)."""
    [config] = of_kind(objects, "ConfigMap")
    port = int(config["data"]["VERA_OBSERVABILITY__SERVICE_METRICS_PORT"])
    return rule.get("ports") == [{"port": port, "protocol": "TCP"}]


def _policies(objects):
    return of_kind(objects, "NetworkPolicy")


@pytest.mark.parametrize("name", VALUE_SETS)
def test_network_policies_select_every_component(name) -> None:
    objects = rendered(name)
    policies = _policies(objects)
    for workload in workloads(objects):
        labels = pod_labels(workload)
        selecting = [p for p in policies if selects(p["spec"]["podSelector"], labels)]
        default_deny = [p for p in selecting if p["metadata"]["name"].endswith("default-deny")]
        assert default_deny and set(default_deny[0]["spec"]["policyTypes"]) == {
            "Ingress", "Egress"}
        assert len(selecting) >= 2, component(workload)  # its own allowances too


@pytest.mark.parametrize("name", VALUE_SETS)
def test_only_the_gateway_and_the_api_take_ingress_from_outside(name) -> None:
    """Apart from Prometheus's scrapes, which reach only the metrics port (pod only)."""
    objects = rendered(name)
    for policy in _policies(objects):
        for rule in policy["spec"].get("ingress", []):
            if "from" in rule and all("podSelector" in peer and len(peer) == 1
                                      for peer in rule["from"]):
                continue  # in-namespace pods only
            if _scrape_only(rule, objects):
                continue
            selected = {
                component(w) for w in workloads(objects)
                if selects(policy["spec"]["podSelector"], pod_labels(w))
            }
            assert selected <= set(FRONTS), policy["metadata"]["name"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_only_the_fronts_and_the_documented_callers_reach_each_grpc_service(name) -> None:
    objects = rendered(name)
    callers = {
        "identity": set(FRONTS), "retrieval": set(FRONTS), "snapshot": set(FRONTS),
        "knowledge": {*FRONTS, "retrieval", "snapshot", "snapshot-maintenance"},
    }
    by_name = {component(w): w for w in workloads(objects)}
    for svc in GRPC:
        labels = pod_labels(by_name[svc])
        allowed = set()
        for policy in _policies(objects):
            if not selects(policy["spec"]["podSelector"], labels):
                continue
            for rule in policy["spec"].get("ingress", []):
                if _scrape_only(rule, objects):
                    continue
                for peer in rule["from"]:
                    allowed |= {
                        c for c, w in by_name.items() if selects(peer["podSelector"], pod_labels(w))
                    }
        assert allowed == callers[svc], svc


@pytest.mark.parametrize("name", VALUE_SETS)
def test_only_processes_that_own_a_schema_reach_postgresql(name) -> None:
    objects = rendered(name)
    port = 5432
    for workload in workloads(objects):
        reaches = any(
            any(p.get("port") == port for p in rule.get("ports", []))
            for policy in _policies(objects)
            if selects(policy["spec"]["podSelector"], pod_labels(workload))
            for rule in policy["spec"].get("egress", [])
        )
        assert reaches == (component(workload) not in FRONTS), component(workload)
        has_dsn = any("VERA_DATABASE__DSN" == e["name"] for c in containers(workload)
                      for e in c.get("env", []))
        assert has_dsn == (component(workload) not in FRONTS)


# --- database logins ----------------------------------------------------------------------


SHARED_DSN = {"name": "vera-database", "key": "dsn"}
SHARED = {"database": {"logins": "shared"}}


def _dsn_refs(objects) -> dict[str, tuple[str, list[dict]]]:
    """Each workload that is given a DSN: the service whose schema its process owns (`vera
    serve S` and `vera migrate S` touch S's alone; `vera migrate` every schema) and the
    Secret references it is given."""
    found = {}
    for workload in workloads(objects):
        [container] = containers(workload)
        refs = [e["valueFrom"]["secretKeyRef"] for e in container.get("env", [])
                if e["name"] == "VERA_DATABASE__DSN"]
        if refs:
            command = container["command"]
            found[workload["metadata"]["name"]] = (command[2] if len(command) > 2 else "", refs)
    return found


@pytest.mark.parametrize("name", VALUE_SETS)
def test_each_schema_owner_is_given_its_own_login_or_the_shared_one(name) -> None:
    """issue 34, finding 7: with a login per service every pod that owns a schema (its
    serving replicas, its maintenance singleton, its migrations Job) reads only its own
    service's login, and no pod the shared one; with database.logins shared, the one."""
    own = service_logins(name)
    given = _dsn_refs(rendered(name))
    assert {service for service, _ in given.values()} == (set(GRPC) if own else {*GRPC, ""})
    for workload, (service, refs) in given.items():
        assert refs == [own[service] if own else SHARED_DSN], workload


def test_a_login_per_service_is_the_default() -> None:
    """issue 39 item 7: without a choice every schema owner signs in as its own service's
    role (vera-database-<service>); the one login owning every schema is an explicit
    choice (database.logins shared) for installs from before, and nothing else."""
    assert _dsn_refs(manifests({})) == _dsn_refs(
        manifests({"database": {"serviceDsnSecrets": SERVICE_DSNS}}))
    assert {tuple(map(str, ref.values())) for _, refs in _dsn_refs(manifests({})).values()
            for ref in refs} == {(d["name"], d["key"]) for d in SERVICE_DSNS.values()}
    shared = _dsn_refs(manifests(SHARED))
    assert {service for service, _ in shared.values()} == {*GRPC, ""}
    assert all(refs == [SHARED_DSN] for _, refs in shared.values())
    with pytest.raises(helm_python.HelmValuesError, match="/database/logins"):
        manifests({"database": {"logins": "one"}})


def test_a_login_per_service_reaches_only_that_services_pods() -> None:
    objects = manifests({"database": {"serviceDsnSecrets": SERVICE_DSNS}})
    given = _dsn_refs(objects)
    for workload, (service, refs) in given.items():
        assert refs == [SERVICE_DSNS[service]], workload
    owners = {service: sorted(w for w, (s, _) in given.items() if s == service) for service in GRPC}
    assert owners["knowledge"] == ["vera-knowledge", "vera-knowledge-maintenance",
                                   "vera-migrations-knowledge"]
    assert owners["snapshot"] == ["vera-migrations-snapshot", "vera-snapshot",
                                  "vera-snapshot-maintenance"]
    assert owners["identity"] == ["vera-identity", "vera-migrations-identity"]
    assert owners["retrieval"] == ["vera-migrations-retrieval", "vera-retrieval"]
    # The fronts own no schema: no login at all.
    deployments = by_component(objects, "Deployment")
    for front in FRONTS:
        assert deployments[front]["metadata"]["name"] not in given


def test_logins_for_only_some_services_are_refused_naming_the_field() -> None:
    """All four or none: a service left on the shared login while its schema is handed to
    its role would lose its tables."""
    some = {svc: SERVICE_DSNS[svc] for svc in ("identity", "knowledge")}
    with pytest.raises(helm_python.HelmValuesError, match="/database/serviceDsnSecrets"):
        manifests({"database": {"serviceDsnSecrets": some}})
    with pytest.raises(helm_python.HelmValuesError, match="/database/serviceDsnSecrets"):
        manifests({"database": {"serviceDsnSecrets": {**SERVICE_DSNS, "gateway": SHARED_DSN}}})


# --- secrets ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_no_secret_is_rendered_in_clear(name) -> None:
    objects = rendered(name)
    assert of_kind(objects, "Secret") == []  # credentials are existing Secrets by reference
    for config in of_kind(objects, "ConfigMap"):
        assert not set(config["data"]) & SECRET_VARIABLES
    for workload in workloads(objects):
        for container in containers(workload):
            for env in container.get("env", []):
                if env["name"] in SECRET_VARIABLES:
                    assert set(env) == {"name", "valueFrom"}
                    assert set(env["valueFrom"]) == {"secretKeyRef"}
            if workload["kind"] == "Deployment":  # every component signs its gRPC calls
                assert "VERA_RPC__AUTH_KEY" in {e["name"] for e in container["env"]}


def test_a_next_rpc_key_reaches_every_component_only_during_a_rotation() -> None:
    """docs/security.md's rotation: with rpc.nextKeySecret named, every process that has
    the key also gets the next one, by reference; without it, none does."""
    rotating = manifests({"rpc": {"nextKeySecret": {"name": "vera-rpc-next"}}})
    for objects, expected in ((rendered("default"), False), (rotating, True)):
        keyed = [{e["name"]: e for e in container.get("env", [])}
                 for workload in workloads(objects) for container in containers(workload)
                 if "VERA_RPC__AUTH_KEY" in {e["name"] for e in container.get("env", [])}]
        assert len(keyed) >= len(GRPC) + len(FRONTS)
        for env in keyed:
            assert ("VERA_RPC__AUTH_NEXT_KEY" in env) == expected
            if expected:
                assert env["VERA_RPC__AUTH_NEXT_KEY"]["valueFrom"] == {
                    "secretKeyRef": {"name": "vera-rpc-next", "key": "next-auth-key"}}


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"database": {"dsn": "postgresql://vera:pw@db/vera"}}, "/database"),
        ({"database": {"serviceDsnSecrets": {svc: f"postgresql://vera_{svc}:pw@db/vera"
                                             for svc in GRPC}}},
         "/database/serviceDsnSecrets/identity"),
        ({"rpc": {"authKey": "k" * 32}}, "/rpc"),
        ({"auth": {"mode": "jwt", "jwt": {"secret": "s" * 32}}}, "/auth/jwt/secret"),
        ({"vectorStore": {"apiKey": "q"}}, "/vectorStore"),
    ],
)
def test_a_secret_given_in_clear_as_a_value_is_refused_naming_the_field(values, field) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=field):
        manifests(values)


def test_the_default_values_hold_no_credential() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def leaves(node, path=()):
        if isinstance(node, dict):
            for key, child in node.items():
                yield from leaves(child, (*path, key))
        else:
            yield path, node

    for path, value in leaves(values):
        if path[-1] == "secretName":  # the name of a Secret, as every secretRef's name
            continue
        if any(word in path[-1].lower() for word in ("secret", "password", "token", "dsn")):
            assert value in ("", None, False, []), path
        assert "://" not in str(value) or "@" not in str(value), path  # no credentials in URLs


# --- authentication -----------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_gateway_starts_authenticated_with_the_rendered_config(name) -> None:
    objects = rendered(name)
    gateway = by_component(objects, "Deployment")["gateway"]
    settings = _settings_from(_container_env(objects, gateway))
    assert settings.auth_profile == "remote-authenticated"
    assert settings.environment != "local"
    check_startup(settings)  # raises on a configuration the gateway would refuse
    assert "vera.example.com" in settings.mcp.allowed_hosts
    assert settings.mcp.allowed_origins == ["https://vera.example.com"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_the_api_starts_with_the_rendered_config_and_answers_its_service_name(name) -> None:
    objects = rendered(name)
    api = by_component(objects, "Deployment")["api"]
    settings = _settings_from(_container_env(objects, api))
    refuse_unauthenticated_non_loopback(settings, "api")
    service = by_component(objects, "Service")["api"]["metadata"]["name"]
    assert f"{service}:*" in settings.api.allowed_hosts  # in-cluster `vera curate --api-url`
    api_host = value_set(name).get("ingress", {}).get("apiHost")
    if api_host:
        assert api_host in settings.api.allowed_hosts
        assert settings.api.allowed_origins == [f"https://{api_host}"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_service_starts_checking_internal_assertions(name) -> None:
    objects = rendered(name)
    for svc, deployment in by_component(objects, "Deployment").items():
        if svc in FRONTS:
            continue
        settings = _settings_from(_container_env(objects, deployment))
        [container] = containers(deployment)
        address = container["command"][container["command"].index("--address") + 1]
        # The rule a service applies before it binds: a key, or refuse to start.
        assert server_auth_key(settings.rpc.auth_key, settings.environment, address) is not None


def test_oidc_without_its_issuer_is_refused_naming_the_field() -> None:
    with pytest.raises(helm_python.HelmValuesError, match="/auth/oidc/issuer"):
        manifests({"auth": {"mode": "oidc"}})


def test_an_ingress_without_tls_renders_only_with_the_loud_value() -> None:
    for tls in ({"secretName": ""}, None):
        ingress = {"tls": tls} if tls is not None else {}
        values = {"ingress": {**ingress, "enabled": True, "host": "vera.example.com"}}
        if tls is None:  # the chart's own default names a certificate Secret
            [rendered_ingress] = of_kind(manifests(values), "Ingress")
            assert rendered_ingress["spec"]["tls"][0]["secretName"] == "vera-tls"
            continue
        with pytest.raises(helm_python.HelmValuesError, match="/ingress/tls/secretName"):
            manifests(values)
    plain = {"ingress": {"tls": {"secretName": ""}, "INSECUREPlainHttp": True}}
    [ingress] = of_kind(manifests(plain), "Ingress")
    assert "tls" not in ingress["spec"]
    notes = next(text for path, text in render_files(plain).items() if path.endswith(".txt"))
    assert "INSECUREPlainHttp" in notes
    assert manifests({"ingress": {"enabled": False, "tls": {"secretName": ""}}})


def test_an_unauthenticated_gateway_renders_only_with_the_loud_value() -> None:
    with pytest.raises(helm_python.HelmValuesError, match="/auth/mode"):
        manifests({"auth": {"mode": "none"}})
    values = {"auth": {"INSECUREUnauthenticatedGateway": True}}
    objects = manifests(values)
    gateway = by_component(objects, "Deployment")["gateway"]
    settings = _settings_from(_container_env(objects, gateway))
    assert settings.auth_profile == "local-dev"
    check_startup(settings)  # starts, loudly, only because of the explicit override
    assert settings.mcp.allow_unauthenticated_non_loopback is True
    notes = next(text for path, text in render_files(values).items() if path.endswith(".txt"))
    assert "INSECUREUnauthenticatedGateway" in notes
    # The switch reaches the gateway alone: the REST API stays authenticated.
    api = _settings_from(_container_env(objects, by_component(objects, "Deployment")["api"]))
    assert api.environment != "local"
    assert api.auth_profile != "local-dev"
    assert api.api.allow_unauthenticated_non_loopback is False
    refuse_unauthenticated_non_loopback(api, "api")  # the API's own startup rule holds


def test_the_api_pod_gets_its_rate_limits_and_trusted_proxies() -> None:
    """docs/security.md: the API's limits per address key on the client behind the
    Ingress only when its controller is a trusted proxy."""
    defaults = rendered("default")
    api = _settings_from(_container_env(defaults, by_component(defaults, "Deployment")["api"]))
    assert api.api.forwarded_allow_ips == ["127.0.0.1"]
    assert api.api.registrations_per_day == 100
    objects = manifests({"api": {"trustedProxies": ["10.42.0.0/16"],
                                 "rateLimits": {"requestsPerMinutePerAddress": 60,
                                                "requestsPerMinutePerKey": 30,
                                                "registrationsPerHourPerAddress": 2,
                                                "registrationsPerDay": 20}}})
    api = _settings_from(_container_env(objects, by_component(objects, "Deployment")["api"]))
    assert api.api.forwarded_allow_ips == ["10.42.0.0/16"]
    assert (api.api.requests_per_minute_per_address, api.api.requests_per_minute_per_key,
            api.api.registrations_per_hour_per_address, api.api.registrations_per_day) == (
        60, 30, 2, 20)


# --- helpers ------------------------------------------------------------------------------


def _container_env(objects, workload) -> dict[str, str]:
    """The container's environment as the process sees it: its ConfigMap plus its own env
    (a secretKeyRef becomes a stand-in value of a valid length)."""
    [container] = containers(workload)
    env: dict[str, str] = {}
    configs = {c["metadata"]["name"]: c["data"] for c in of_kind(objects, "ConfigMap")}
    for source in container.get("envFrom", []):
        env.update(configs[source["configMapRef"]["name"]])
    for item in container.get("env", []):
        env[item["name"]] = item.get("value", "s" * 48)
    return env


def _settings_from(env: dict[str, str]) -> Settings:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        return load_settings()


def _mebibytes(quantity: str) -> float:
    units = {"Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


@pytest.mark.parametrize("name", [*VALUE_SETS, "dev"])
def test_console_cookies_are_secure_whenever_the_ingress_is_on(name) -> None:
    """issue 39 item 13: TLS ends at the Ingress (or in front of it), so the API sees plain
    http: the chart tells it its public address is https. Without an Ingress (the dev
    values' port-forward) it does not."""
    [config] = of_kind(rendered(name), "ConfigMap")
    ingress = value_set(name).get("ingress", {}).get("enabled", True)
    assert config["data"].get("VERA_API__SECURE_COOKIES") == ("true" if ingress else None)
    settings = Settings(api={"secure_cookies": config["data"].get(
        "VERA_API__SECURE_COOKIES", "false")})
    assert settings.api.secure_cookies is ingress
