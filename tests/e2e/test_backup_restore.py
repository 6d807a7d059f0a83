"""Backups that restore (issue 41): a team deployment is backed up with `vera backup`
while it serves, restored with `vera restore` into a fresh data dir, started with its
variables, and serves the same facts, proposals, keys and history; the retrieval index,
which a backup leaves out, rebuilds from the database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from team import bearer, ingested_fact_cited, shared_project

from vera.stack.backup import DUMP_FILE, MANIFEST_FILE
from vera.stack.launcher import LaunchedStack, launch, launch_env
from vera.stack.profile import recorded_profile
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

TEAM = {"VERA_MCP__JWT_SECRET": AUTH_SECRET, "VERA_MCP__AUTH_ISSUER": AUTH_ISSUER,
        "VERA_MCP__AUTH_AUDIENCE": AUTH_AUDIENCE}


def api_url(stack: LaunchedStack) -> str:
    return read_stack_file(stack.data_dir)["api_url"]  # type: ignore[index]


def mcp(stack: LaunchedStack, base: str, api_key: str) -> Client:
    token = httpx.post(f"{base}/identity/mcp-token", headers=bearer(api_key), timeout=60,
                       json={"scopes": ["memory:read", "memory:propose"]}).json()
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token['access_token']}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


def vera(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vera.cli", *args], capture_output=True,
                          text=True, timeout=600)


async def served(stack: LaunchedStack, owner: dict, member: dict, slug: str) -> dict:
    """What the deployment serves the team: who the keys are, the pending proposals, the
    project's history (the change feed)."""
    async with httpx.AsyncClient(base_url=api_url(stack), timeout=60) as api:
        me = {name: (await api.get("/identity/me", headers=bearer(who["api_key"]))).json()
              for name, who in (("owner", owner), ("member", member))}
        proposals = (await api.get(f"/curation/projects/{slug}/proposals",
                                   headers=bearer(owner["api_key"]))).json()
        changes = (await api.get(f"/curation/projects/{slug}/changes",
                                 headers=bearer(owner["api_key"]))).json()
    return {"me": me, "proposals": proposals["proposals"], "changes": changes["changes"]}


async def test_a_serving_team_deployment_restores_into_a_fresh_data_dir(tmp_path: Path) -> None:
    data_dir, backup, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    with launch(data_dir, launch_env(data_dir, **TEAM)) as team:
        created = team.vera("admin", "create-user", "--name", "root", "--admin",
                            "--data-dir", str(data_dir))
        assert created.returncode == 0, created.stderr
        root = next(line.split(":", 1)[1].strip() for line in created.stdout.splitlines()
                    if line.startswith("api_key"))
        async with httpx.AsyncClient(base_url=api_url(team), timeout=60) as api:
            owner, member = [
                (await api.post("/identity/users", headers=bearer(root),
                                json={"display_name": name})).json()
                for name in ("olivia", "dev")]
            project = await shared_project(api, owner, member)
        async with mcp(team, api_url(team), member["api_key"]) as client:
            await ingested_fact_cited(client, project["seed_fact_key"])
            keys = []
            for what in ("three times with backoff", "behind the ledger lock"):
                proposed = await client.call_tool("knowledge_propose", {
                    "subject": "payments-api", "predicate": "retry_policy", "object": what,
                    "evidence_text": "seen in handler.py", "task_ref": "task-7",
                    "project": project["slug"]})
                assert not proposed.is_error, proposed.content
                keys.append(proposed.structured_content["fact"]["fact_key"])
        async with httpx.AsyncClient(base_url=api_url(team), timeout=60) as api:
            verified = await api.post(
                f"/curation/projects/{project['slug']}/proposals/{keys[0]}/verify",
                headers=bearer(owner["api_key"]), json={})
        assert verified.status_code == 200, verified.text
        before = await served(team, owner, member, project["slug"])

        took = team.vera("backup", str(backup), "--data-dir", str(data_dir))
        assert took.returncode == 0, took.stderr
        manifest = json.loads((backup / MANIFEST_FILE).read_text())
        assert manifest["while_serving"] is True and (backup / DUMP_FILE).stat().st_size > 0
        assert backup.stat().st_mode & 0o077 == 0  # owner-only: it holds the team's data

    # Into a data dir that holds something: refused, nothing touched.
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep").write_text("x")
    assert vera("restore", str(backup), "--data-dir", str(tmp_path / "busy")).returncode == 1
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["keep"]

    restore = vera("restore", str(backup), "--data-dir", str(restored))
    assert restore.returncode == 0, restore.stderr
    assert recorded_profile(restored) == "remote-authenticated"  # never local by accident
    assert not (restored / "vectors").exists()  # the index is rebuilt, not restored

    with launch(restored, launch_env(restored, **TEAM)) as again:
        assert await served(again, owner, member, project["slug"]) == before
        assert [p["fact_key"] for p in before["proposals"]] == [keys[1]]
        assert len(before["changes"]) >= 3  # the ingest, the proposals, the verification
        # The retrieval index rebuilds: the ingested fact and the verified one are served.
        async with mcp(again, api_url(again), member["api_key"]) as client:
            await ingested_fact_cited(client, project["seed_fact_key"], timeout=180)
            context = await client.call_tool("knowledge_get_context", {
                "query": "what is the retry policy of payments-api?",
                "project": project["slug"]})
            assert not context.is_error, context.content
            assert any(r["object"] == "three times with backoff"
                       for r in context.structured_content["results"])
