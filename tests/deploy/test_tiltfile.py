"""The Tiltfile (Starlark) cannot run here: it is parsed as Python and evaluated against
recording stand-ins for Tilt's builtins, then checked against the chart it deploys."""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

import pytest
import yaml
from deploy_manifests import CHART, ROOT, by_component, manifests, workloads

TILTFILE = ROOT / "Tiltfile"


class _Tilt:
    """Records every builtin call the Tiltfile makes."""

    def __init__(self, embedded: bool) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []
        self.embedded = embedded

    def namespace(self) -> dict:
        def recorder(name):
            def call(*args, **kwargs):
                self.calls.append((name, args, kwargs))
                return {"builtin": name, "args": args, "kwargs": kwargs}
            return call

        names = ("local_resource", "probe", "http_get_action", "docker_build_with_restart",
                 "fall_back_on", "sync", "k8s_yaml", "local", "helm", "k8s_resource", "link")
        scope = {name: recorder(name) for name in names}

        def load(module, *symbols):
            assert module == "ext://restart_process"
            assert symbols == ("docker_build_with_restart",)

        scope["load"] = load
        scope["config"] = types.SimpleNamespace(
            define_bool=recorder("config.define_bool"),
            parse=lambda: {"embedded": self.embedded},
        )
        scope["os"] = types.SimpleNamespace(path=types.SimpleNamespace(exists=lambda p: True))
        return scope

    def of(self, name: str) -> list[tuple[tuple, dict]]:
        return [(args, kwargs) for called, args, kwargs in self.calls if called == name]


def _run(embedded: bool) -> _Tilt:
    tilt = _Tilt(embedded)
    exec(compile(TILTFILE.read_text(), str(TILTFILE), "exec"), tilt.namespace())
    return tilt


@pytest.fixture(scope="module")
def dev_objects() -> list[dict]:
    return manifests(yaml.safe_load((CHART / "dev-values.yaml").read_text()))


def test_every_resource_it_names_exists_and_every_workload_is_named(dev_objects) -> None:
    tilt = _run(embedded=False)
    named = {args[0] for args, _ in tilt.of("k8s_resource")}
    dev_data = [d for name in ("postgres.yaml", "qdrant.yaml")
                for d in yaml.safe_load_all((CHART.parent / "dev" / name).read_text()) if d]
    existing = {w["metadata"]["name"] for w in workloads(dev_objects)}
    existing |= {d["metadata"]["name"] for d in dev_data if d["kind"] == "Deployment"}
    assert named <= existing, named - existing
    assert {w["metadata"]["name"] for w in workloads(dev_objects)} <= named


def test_resources_are_grouped_by_component(dev_objects) -> None:
    tilt = _run(embedded=False)
    labels = {args[0]: kwargs["labels"] for args, kwargs in tilt.of("k8s_resource")}
    for workload in workloads(dev_objects):
        component = workload["metadata"]["labels"]["app.kubernetes.io/component"]
        group = component.removesuffix("-maintenance")
        expected = ["data"] if component == "migrations" else [group]
        assert labels[workload["metadata"]["name"]] == expected


def test_the_mcp_endpoint_and_the_rest_api_are_port_forwarded(dev_objects) -> None:
    tilt = _run(embedded=False)
    forwards = {args[0]: kwargs.get("port_forwards") for args, kwargs in tilt.of("k8s_resource")}
    deployments = by_component(dev_objects, "Deployment")
    for component in ("gateway", "api"):
        port = deployments[component]["spec"]["template"]["spec"]["containers"][0]["ports"][0]
        assert forwards[f"vera-{component}"] == [f"{port['containerPort']}:{port['containerPort']}"]


def test_live_update_syncs_each_package_folder_where_the_image_installs_it(dev_objects) -> None:
    tilt = _run(embedded=False)
    [(args, kwargs)] = tilt.of("docker_build_with_restart")
    assert args[0] == "vera"  # the chart's image repository in the dev values
    assert kwargs["target"] == "dev"  # the Dockerfile stage whose package the user may write
    assert "FROM runtime AS dev" in (ROOT / "Dockerfile").read_text()
    assert yaml.safe_load((CHART / "dev-values.yaml").read_text())["image"]["repository"] == "vera"
    syncs = {a[0]: a[1] for a, _ in tilt.of("sync")}
    pyproject = (ROOT / "pyproject.toml").read_text()
    site = "/opt/vera/venv/lib/python3.11/site-packages/"
    for package, folder in (("vera", "src/vera"), ("vera.services", "services"),
                            ("vera.gateway", "gateway"), ("vera.api", "api")):
        assert f'"{package}" = "{folder}"' in pyproject
        assert syncs[folder] == site + package.replace(".", "/")
    # The restart wrapper runs every chart command in development.
    prefix = yaml.safe_load((CHART / "dev-values.yaml").read_text())["commandPrefix"]
    for deployment in by_component(dev_objects, "Deployment").values():
        command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
        assert command[: len(prefix)] == prefix
    [(helm_args, helm_kwargs)] = tilt.of("helm")
    assert helm_args[0] == "charts/vera"
    assert helm_kwargs["values"] == ["charts/vera/dev-values.yaml"]
    assert Path(ROOT / helm_kwargs["values"][0]).exists()


def test_the_embedded_stack_stays_an_option_for_laptops_without_a_cluster() -> None:
    tilt = _run(embedded=True)
    [(_, kwargs)] = tilt.of("local_resource")
    assert kwargs["serve_cmd"].startswith("scripts/up ")
    assert not tilt.of("k8s_resource") and not tilt.of("helm")


def test_the_dev_secrets_cover_every_secret_the_dev_chart_reads(dev_objects, tmp_path) -> None:
    """charts/dev/secrets.sh (run by the Tiltfile) makes each Secret a dev pod refers to:
    a missing one leaves the pod in CreateContainerConfigError."""
    script = tmp_path / "charts" / "dev" / "secrets.sh"  # it writes beside the checkout root
    script.parent.mkdir(parents=True)
    script.write_text((ROOT / "charts" / "dev" / "secrets.sh").read_text())
    # An env file from before the signing key: the key is added to it once, not made anew.
    (tmp_path / ".vera-data").mkdir()
    (tmp_path / ".vera-data" / "dev-secrets.env").write_text(
        "POSTGRES_PASSWORD=p\nRPC_AUTH_KEY=r\nMCP_JWT_SECRET=m\n")
    runs = [subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True)
            for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout
    secrets = {s["metadata"]["name"]: set(s["stringData"])
               for s in yaml.safe_load_all(runs[0].stdout) if s}
    referred = set()
    for workload in workloads(dev_objects):
        for container in workload["spec"]["template"]["spec"]["containers"]:
            for item in container.get("env", []):
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    referred.add((ref["name"], ref["key"]))
    assert ("vera-retrieval-snapshot", "signing-key") in referred
    assert referred and all(key in secrets.get(name, set()) for name, key in referred), referred
