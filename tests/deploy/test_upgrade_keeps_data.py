"""An upgrade does not lose data: the release before the newest migration (this repository
at the parent of the commit that added it, `git archive`d and run from its own package
tree) fills a database through its own `vera up`, `vera ingest`, `vera admin` and MCP;
then this commit's `vera migrate` (the chart's hook Job) runs on it, and this commit's
stack serves every fact, assertion, persisted pack and API key the old one wrote."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from deploy_manifests import ROOT

from vera.config import load_settings
from vera.db.embedded import EmbeddedPostgres
from vera.identity.v1 import identity_pb2
from vera.rpc.backends import Backends
from vera.stack.launcher import launch, launch_env
from vera.stack.run_files import stack_client_settings

pytestmark = pytest.mark.e2e

OBJECT = "PostgreSQL 16 on the ledger cluster"


def newest_migration() -> tuple[str, str]:
    """The commit that added the newest migration file of any service, and that service."""
    found = subprocess.run(
        ["git", "log", "--diff-filter=A", "-1", "--format=%H", "--name-only", "--",
         "services/*/migrations/*.sql"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert found, "no migration in this clone's history (a shallow clone?)"
    commit, first_file = found[0], found[1]
    return commit, first_file.split("/")[1]


def previous_release(into: Path) -> Path:
    """The tree before the newest migration, with the installed package's shape (what
    scripts/package-tree makes) so that ``PYTHONPATH`` runs its code, not this commit's."""
    commit, _ = newest_migration()
    archive = subprocess.run(["git", "archive", "--format=tar", f"{commit}^"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package_dir = tomllib.loads((into / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    tree = into / "package-tree" / "vera"
    tree.mkdir(parents=True)
    for entry in (into / package_dir["vera"]).iterdir():
        (tree / entry.name).symlink_to(entry)
    for package, folder in package_dir.items():
        if package != "vera":
            (tree / package.rpartition(".")[2]).symlink_to(into / folder)
    return into / "package-tree"


async def test_this_commits_migrations_keep_what_the_previous_release_wrote(
        tmp_path: Path) -> None:
    old_tree = previous_release(tmp_path / "previous")
    data_dir = tmp_path / "data"
    facts = tmp_path / "ledger.jsonl"
    facts.write_text("".join(json.dumps(record) + "\n" for record in [
        {"type": "source", "id": "adr-12", "source_type": "adr", "title": "ADR 12",
         "uri": "https://wiki.example/adr/12", "observed_at": "2026-10-02T00:00:00Z"},
        {"type": "fact", "subject": "ledger-service", "predicate": "uses_database",
         "object": OBJECT, "source": "adr-12", "evidence": f"The ledger runs {OBJECT}.",
         "locator": "L3-L9"},
    ]))  # fmt: skip

    # The previous release fills the database.
    old_env = launch_env(data_dir, PYTHONPATH=str(old_tree))
    with launch(data_dir, old_env, cwd=old_tree.parent) as old:
        which = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", "import vera.cli; print(vera.cli.__file__)"],
            env=old_env, cwd=old_tree.parent, capture_output=True, text=True)
        assert which.stdout.startswith(str(old_tree)), which  # the old code, not this commit's
        loaded = old.vera("ingest", str(facts), "--project", "ledger", "--data-dir",
                          str(data_dir))  # fmt: skip
        assert loaded.returncode == 0, loaded.stderr
        created = old.vera("admin", "create-user", "--name", "root", "--admin",
                           "--data-dir", str(data_dir))  # fmt: skip
        assert created.returncode == 0, created.stderr
        api_key = next(line.split(":", 1)[1].strip() for line in created.stdout.splitlines()
                       if line.startswith("api_key"))
        async with old.mcp_client() as client:
            pack = await client.call_tool("knowledge_get_context", {
                "query": "which database does ledger-service use", "project": "ledger",
                "persist": True})  # fmt: skip
        assert not pack.is_error, pack.content
        pack_id = pack.structured_content["pack_id"]
        before = [r["fact_key"] for r in pack.structured_content["results"]]
        assert before

    # This commit's hook Job: `vera migrate` on the filled database.
    pg = EmbeddedPostgres(data_dir)
    pg.start()
    try:
        dsn = await pg.ensure_database()
        migrated = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "vera.cli", "migrate"],
            env={**os.environ, "VERA_DATABASE__DSN": dsn}, capture_output=True, text=True)
        assert migrated.returncode == 0, migrated.stderr
        # Each service applies exactly the migrations the previous release did not have.
        for service in ("identity", "knowledge", "retrieval", "snapshot"):
            new = {f.name for f in (ROOT / "services" / service / "migrations").glob("*.sql")}
            had = {f.name for f in
                   (old_tree.parent / "services" / service / "migrations").glob("*.sql")}
            assert f"{service}: {len(new - had)} migration(s) applied" in migrated.stdout
        assert f"{newest_migration()[1]}: 0 migration(s)" not in migrated.stdout
    finally:
        pg.stop()

    # This commit's stack serves it all. The old release made an account in local mode,
    # which is how a data dir from before the profile record looks like a team's
    # (vera.stack.profile): it stays in local mode here on purpose.
    with launch(data_dir, up_args=("--allow-profile-change",)) as new:
        # The key authenticates with identity (local mode's REST API takes only the data
        # dir's secret, so identity is asked as the REST API asks it for a deployment).
        backends = Backends.open(stack_client_settings(load_settings(), data_dir), caller="cli")
        try:
            owner = await backends.identity.AuthenticateApiKey(
                identity_pb2.AuthenticateApiKeyRequest(api_key=api_key))
        finally:
            await backends.close()
        assert owner.principal.admin
        async with new.mcp_client() as client:
            kept = await client.call_tool("knowledge_get_context_pack", {"pack_id": pack_id})
            assert not kept.is_error, kept.content
            assert [r["fact_key"] for r in kept.structured_content["results"]] == before
            context = await client.call_tool("knowledge_get_context", {
                "query": "which database does ledger-service use", "project": "ledger"})
            assert not context.is_error, context.content
            [top, *_] = context.structured_content["results"]
            assert top["object"] == OBJECT and top["fact_key"] in before
            assert [c["source_id"] for c in top["citations"]] == ["adr-12"]
