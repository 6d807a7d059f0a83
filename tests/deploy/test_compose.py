"""compose.yaml: valid against the Compose specification, published on loopback only."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from deploy_manifests import ROOT, SECRET_VARIABLES

from vera.commands import SERVICE_NAMES
from vera.config import load_settings
from vera.entrypoints.mcp.main import check_startup

COMPOSE = ROOT / "compose.yaml"
COMMANDS = (
    ["python", "-m", "vera.entrypoints.mcp.main"],
    ["python", "-m", "vera.entrypoints.api.main"],
)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # anchors and merge keys resolved


def _vera_services(compose) -> dict[str, dict]:
    return {name: svc for name, svc in compose["services"].items()
            if svc.get("image", "").startswith("vera:")}


def test_compose_validates_against_the_compose_specification() -> None:
    # check-jsonschema vendors the Compose specification's JSON schema: no network needed.
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(COMPOSE)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_only_the_gateway_and_the_api_are_published_and_only_on_loopback(compose) -> None:
    published = {name: svc["ports"] for name, svc in compose["services"].items()
                 if "ports" in svc}
    assert set(published) == {"gateway", "api"}
    for ports in published.values():
        for port in ports:
            host, _, _ = str(port).partition(":")
            assert host == "127.0.0.1", port
            assert "9101" not in str(port)
    for svc in compose["services"].values():
        assert "9101" not in str(svc.get("ports", []))


def test_every_vera_process_runs_a_command_the_suite_runs_as_a_locked_down_user(
    compose,
) -> None:
    services = _vera_services(compose)
    assert set(services) >= {*SERVICE_NAMES, "gateway", "api"}
    for name, svc in services.items():
        command = svc["command"]
        if command[:2] == ["vera", "serve"]:
            assert command[2] == name and command[2] in SERVICE_NAMES
        else:
            assert command in COMMANDS, name
        assert svc["user"].split(":")[0] != "0" and svc["read_only"] is True
        assert svc["cap_drop"] == ["ALL"]


def test_no_credential_is_written_into_compose_yaml(compose) -> None:
    for svc in compose["services"].values():
        environment = svc.get("environment", {})
        assert not set(environment) & (SECRET_VARIABLES | {"POSTGRES_PASSWORD"})


def test_the_backend_network_has_no_route_out(compose) -> None:
    assert compose["networks"]["backend"]["internal"] is True
    for name in ("postgres", "qdrant", *SERVICE_NAMES):
        assert compose["services"][name]["networks"] == ["backend"], name


def test_the_gateway_starts_authenticated_with_the_compose_environment(compose) -> None:
    gateway = compose["services"]["gateway"]
    with pytest.MonkeyPatch.context() as patch:
        for key, value in gateway["environment"].items():
            patch.setenv(key, str(value))
        # What the gateway's env files under .vera-data/compose/ supply (docs/deploy.md).
        patch.setenv("VERA_MCP__JWT_SECRET", "s" * 48)
        patch.setenv("VERA_RPC__AUTH_KEY", "k" * 48)
        settings = load_settings()
    assert settings.auth_profile == "remote-authenticated"
    check_startup(settings)


def test_each_service_healthcheck_asks_its_own_port_over_grpc_health(compose) -> None:
    import grpc_health.v1.health_pb2  # noqa: F401  (what the healthcheck imports)

    for name in SERVICE_NAMES:
        service = compose["services"][name]
        check = service["healthcheck"]["test"]
        assert check[:3] == ["CMD", "python", "-c"]
        compile(check[3], f"<{name} healthcheck>", "exec")
        port = service["command"][-1].rsplit(":", 1)[1]
        assert f"'127.0.0.1:{port}'" in check[3]


def test_the_compose_runner_interpolates_as_compose_does() -> None:
    """compose_host.interpolate, which the compose run (test_compose_runs.py) applies to
    compose.yaml: the forms of the Compose specification's interpolation."""
    from compose_host import ComposeError, interpolate

    env = {"SET": "value", "EMPTY": ""}
    cases = {
        "${SET}": "value", "$SET": "value", "${UNSET}": "", "$$SET": "$SET",
        "${UNSET:-default}": "default", "${EMPTY:-default}": "default",
        "${EMPTY-default}": "", "${SET:-default}": "value",
        "${SET:+alt}": "alt", "${EMPTY:+alt}": "", "${EMPTY+alt}": "alt",
        "${UNSET:-${SET}}": "value", "a-${SET}-b": "a-value-b",
    }
    for text, expected in cases.items():
        assert interpolate(text, env) == expected, text
    assert interpolate({"k": ["${SET}", 5]}, env) == {"k": ["value", 5]}
    for required in ("${UNSET:?needed}", "${EMPTY:?needed}", "${UNSET?needed}"):
        with pytest.raises(ComposeError, match="needed"):
            interpolate(required, env)
    assert interpolate("${EMPTY?needed}", env) == ""
