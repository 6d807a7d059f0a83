"""Renders the Helm chart offline (helm-python-sdk bundles Helm's engine) for the tests."""

from __future__ import annotations

import typing
from functools import cache
from pathlib import Path
from typing import Any

import helm_python
import yaml
from pydantic import BaseModel, SecretStr

from vera.config import Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "vera"
# The value sets CI renders; each file under charts/vera/ci is one (default: no file).
VALUE_SETS = ("default", "all-in-one", "ha", "oidc")
RELEASE = "vera"
NAMESPACE = "vera"
# The newest Kubernetes the pinned kubernetes-validate carries schemas for (the chart
# needs >= 1.27 for native gRPC probes).
KUBE_VERSION = "1.37.0"


def secret_settings(model: type[BaseModel] = Settings, prefix: str = "VERA_") -> dict[str, str]:
    """Every VERA_* variable whose setting is a SecretStr, found from the Settings model,
    with the setting's field name."""
    found = {}
    for name, field in model.model_fields.items():
        variable = f"{prefix}{name.upper()}"
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            if arg is SecretStr:
                found[variable] = name
            elif isinstance(arg, type) and issubclass(arg, BaseModel):
                found |= secret_settings(arg, variable + "__")
    return found


# Credentials: they may reach a process only as secretKeyRef, never in a ConfigMap.
SECRET_VARIABLES = frozenset(secret_settings())


def value_set(name: str) -> dict[str, Any]:
    if name == "default":
        return {}
    if name == "dev":  # the Tiltfile's (writable root filesystem: not a CI value set)
        return yaml.safe_load((CHART / "dev-values.yaml").read_text())
    return yaml.safe_load((CHART / "ci" / f"{name}-values.yaml").read_text())


# The Secret each service reads with database.logins perService (the default) when the
# values name none.
SERVICE_DSNS = {svc: {"name": f"vera-database-{svc}", "key": "dsn"}
                for svc in ("identity", "knowledge", "retrieval", "snapshot")}


def service_logins(name: str) -> dict[str, dict[str, str]]:
    """The value set's Secret per service, or {} when it chose the one shared login."""
    database = value_set(name).get("database", {})
    if database.get("logins", "perService") == "shared":
        return {}
    return {**SERVICE_DSNS, **database.get("serviceDsnSecrets", {})}


def render_files(values: dict[str, Any]) -> dict[str, str]:
    return helm_python.Chart.load(str(CHART)).render(
        values, name=RELEASE, namespace=NAMESPACE, is_install=True
    )


def manifests(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rendered Kubernetes object (NOTES.txt is not one)."""
    objects = []
    for path, text in sorted(render_files(values).items()):
        if path.endswith(".txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


@cache
def _rendered(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(manifests(value_set(name)))


def rendered(name: str) -> list[dict[str, Any]]:
    return [dict(obj) for obj in _rendered(name)]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] in ("Deployment", "Job")]


def component(obj: dict[str, Any]) -> str:
    return obj["metadata"]["labels"]["app.kubernetes.io/component"]


def by_component(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {component(obj): obj for obj in of_kind(objects, kind)}


def pod_template(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod a Deployment or Job makes (its template), or a bare Pod itself."""
    if workload["kind"] == "Pod":
        return {"metadata": workload["metadata"], "spec": workload["spec"]}
    return workload["spec"]["template"]


def helm_test_pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Pods `helm test` runs."""
    return [pod for pod in of_kind(objects, "Pod")
            if pod["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    return pod_template(workload)["metadata"]["labels"]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return pod_template(workload)["spec"]["containers"]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics (matchLabels and matchExpressions)."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values", [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True
