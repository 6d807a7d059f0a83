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

import re
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from deploy_manifests import NAMESPACE, ROOT, of_kind, rendered, value_set
from dockerfile_parse import DockerfileParser
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from rendered_cluster import IMAGE_MODELS, RenderedCluster

from vera.db.embedded import EmbeddedPostgres

pytestmark = pytest.mark.e2e

READY_TIMEOUT = 300.0
ALL_SCOPES = ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"]


def baked_models(cache: pytest.Cache) -> Path:
    """The image's model directory: the Dockerfile's own build step (its ``python -c`` that
    exports MiniLM to ONNX and quantizes it), run once into pytest's cache."""
    directory = cache.mkdir("vera-models")
    run = next(i["value"] for i in DockerfileParser(str(ROOT / "Dockerfile")).structure
               if i["instruction"] == "RUN" and IMAGE_MODELS in i["value"])
    [script] = re.findall(r'python -c "([^"]+)"', run)
    built = subprocess.run([sys.executable, "-c", script.replace(IMAGE_MODELS, str(directory))],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    return directory


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """The platform team's PostgreSQL, started on its own (outside /tmp: each pod mounts
    its own /tmp, and the DSN names the server's socket directory)."""
    with tempfile.TemporaryDirectory(prefix="vera-rendered-pg-", dir="/var/tmp") as tmp:
        pg = EmbeddedPostgres(Path(tmp))
        pg.start()
        try:
            import asyncio

            yield asyncio.run(pg.ensure_database("vera"))
        finally:
            pg.stop()


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


@pytest.fixture(scope="module")
def ha(request: pytest.FixtureRequest, database: str,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[RenderedCluster]:
    objects = rendered("ha")
    cluster = RenderedCluster(
        objects, cluster_secrets(objects, database), tmp_path_factory.mktemp("ha"),
        namespace=NAMESPACE,
        bind_host=value_set("ha").get("bindHost", "0.0.0.0"),
        replicas={"retrieval": 2},
        overrides={"VERA_RETRIEVAL__QDRANT_URL": ":memory:"},
        model_dir=baked_models(request.config.cache),
    )
    with cluster:
        cluster.wait_ready(READY_TIMEOUT)
        yield cluster


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


async def test_the_team_loop_through_the_rendered_gateway_and_api(ha: RenderedCluster) -> None:
    ingress = value_set("ha")["ingress"]
    # The first administrator, as the chart's NOTES say (kubectl exec deploy/vera-api).
    notes_command = _notes_admin_command()
    created = ha.exec(notes_command["deployment"], notes_command["argv"])
    assert created.returncode == 0, created.stderr
    admin_key = _field(created.stdout, "api_key")

    api = httpx.AsyncClient(base_url=ha.ingress_url(ingress["apiHost"]),
                            headers={"host": ingress["apiHost"]}, timeout=30)
    async with api:
        assert (await api.get("/readyz")).status_code == 200
        user = await api.post("/identity/users", json={"display_name": "dev"},
                              headers=_bearer(admin_key))
        assert user.status_code == 201, user.text
        user_key = (await api.post("/identity/api-keys", json={"label": "laptop"},
                                   headers=_bearer(user.json()["api_key"]))).json()["api_key"]
        token = await api.post("/identity/mcp-token", json={"scopes": ALL_SCOPES},
                               headers=_bearer(user_key))
        assert token.status_code == 200, token.text

    async with _mcp(ha, ingress["host"], token.json()["access_token"]) as client:
        boot = await client.call_tool("knowledge_bootstrap", {})
        assert not boot.is_error, boot.content
        assert boot.structured_content["auth_profile"] == "remote-authenticated"


# --- helpers ------------------------------------------------------------------------------


def _notes_admin_command() -> dict:
    """The first-administrator command printed by NOTES.txt, as deployment + argv."""
    from deploy_manifests import render_files

    notes = next(t for p, t in render_files(value_set("ha")).items() if p.endswith(".txt"))
    match = re.search(r"kubectl -n \S+ exec deploy/(\S+) -- (.+)", notes)
    assert match, notes
    return {"deployment": match[1], "argv": match[2].split()}


def _field(output: str, name: str) -> str:
    fields = dict(line.split(":", 1) for line in output.splitlines() if ":" in line)
    return fields[name].strip()


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _mcp(cluster: RenderedCluster, host: str, token: str) -> Client:
    # The Ingress host as Host, as the controller passes it to the gateway's Service.
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}", "host": host})
    return Client(streamable_http_client(cluster.ingress_url(host) + "/mcp", http_client=http))
