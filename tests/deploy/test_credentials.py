"""Each container is given exactly the credentials its process reads, in compose.yaml and in
the rendered chart (issue 34): no container holds another's key.

What a VERA process reads is found from the code (credential_reads.py: the ``SecretStr``
settings the modules its command runs access); what the postgres and qdrant images read,
from their documentation. "Exactly" is among the credentials a deployment has: a setting
nobody is given (the OIDC signing key, a snapshot signing key) is optional.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from compose_host import command, load_compose, runs_the_image, service_environment
from compose_host import write_documented_credentials as write_credentials
from credential_reads import reads
from deploy_manifests import SECRET_VARIABLES, VALUE_SETS, containers, rendered, workloads

from vera.commands import SERVICE_NAMES

# The variables the third-party images document for their credentials, and the service
# roles' passwords compose/postgres/10-vera-roles.sh sets at init.
ROLE_PASSWORDS = {f"DB_PASSWORD_{service.upper()}" for service in SERVICE_NAMES}
IMAGE_CREDENTIALS = {"postgres": {"POSTGRES_PASSWORD", *ROLE_PASSWORDS},
                     "qdrant": {"QDRANT__SERVICE__API_KEY"}}
CREDENTIALS = SECRET_VARIABLES.union(*IMAGE_CREDENTIALS.values())


def test_the_code_names_what_each_process_reads() -> None:
    """The derivation itself, on what is known of each process."""
    assert reads(["vera", "migrate"]) == {"VERA_DATABASE__DSN"}
    assert reads(["vera", "migrate", "identity"]) == {"VERA_DATABASE__DSN"}
    assert reads(["vera", "serve", "identity"]) == {"VERA_DATABASE__DSN", "VERA_RPC__AUTH_KEY"}
    assert {"VERA_RETRIEVAL__QDRANT_API_KEY", "VERA_RETRIEVAL__SNAPSHOT_SIGNING_KEY"} <= reads(
        ["vera", "serve", "retrieval"])
    gateway = reads(["python", "-m", "vera.entrypoints.mcp.main"])
    assert {"VERA_MCP__JWT_SECRET", "VERA_RPC__AUTH_KEY"} <= gateway
    assert "VERA_DATABASE__DSN" not in gateway
    assert "VERA_DATABASE__DSN" not in reads(["python", "-m", "vera.entrypoints.api.main"])


@pytest.fixture(scope="module")
def compose_given(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The credentials each compose service is given, from the env files docs/deploy.md's
    script writes."""
    project_dir: Path = tmp_path_factory.mktemp("compose-credentials")
    write_credentials(project_dir)
    compose = load_compose(env={})
    return {name: set(service_environment(service, project_dir, {})) & CREDENTIALS
            for name, service in compose["services"].items()}


def test_each_compose_container_gets_exactly_the_credentials_its_process_reads(
        compose_given: dict[str, set[str]]) -> None:
    services = load_compose(env={})["services"]
    configured = set().union(*compose_given.values())
    for name, service in services.items():
        wanted = (reads(command(service)) if runs_the_image(service)
                  else IMAGE_CREDENTIALS[name]) & configured
        assert compose_given[name] == wanted, name


def test_postgres_and_qdrant_get_no_vera_credential(compose_given: dict[str, set[str]]) -> None:
    assert compose_given["postgres"] == {"POSTGRES_PASSWORD", *ROLE_PASSWORDS}
    assert compose_given["qdrant"] == {"QDRANT__SERVICE__API_KEY"}


def test_each_compose_service_signs_in_to_postgres_as_a_role_of_its_own(
        tmp_path: Path) -> None:
    """Its own role and password (the one the init script sets from postgres' env file),
    never the superuser's."""
    write_credentials(tmp_path)
    services = load_compose(env={})["services"]
    roles = service_environment(services["postgres"], tmp_path, {})
    for name in SERVICE_NAMES:
        dsn = urlsplit(service_environment(services[name], tmp_path, {})["VERA_DATABASE__DSN"])
        assert (dsn.username, dsn.password) == (
            f"vera_{name}", roles[f"DB_PASSWORD_{name.upper()}"]), name
        assert dsn.password != roles["POSTGRES_PASSWORD"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_each_chart_container_gets_exactly_the_credentials_its_process_reads(
        value_set: str) -> None:
    given = {}
    for workload in workloads(rendered(value_set)):
        for container in containers(workload):
            argv = [*container.get("command", []), *container.get("args", [])]
            secret_refs = {e["name"] for e in container.get("env", [])
                           if "secretKeyRef" in e.get("valueFrom", {})}
            given[workload["metadata"]["name"]] = (argv, secret_refs)
    configured = set().union(*(refs for _, refs in given.values()))
    for name, (argv, refs) in given.items():
        assert refs == reads(argv) & configured, name
