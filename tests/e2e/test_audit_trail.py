"""The audit trail through the real authenticated stack: identity records an administrator,
API keys and a flood of failed authentications (aggregated), administrators alone read it
over REST, and `vera audit verify` passes, then names the record altered in the database."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import asyncpg
import httpx
import pytest

from vera.db.embedded import EmbeddedPostgres
from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e

BOGUS = "vera_0123456789abcdef_" + "x" * 43  # well-formed, of no key


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("audit-stack") / "data"
    env = launch_env(
        data_dir,
        VERA_API__OPEN_REGISTRATION="true",
        VERA_MCP__JWT_SECRET="audit-trail-mcp-signing-secret-0123456789abcdef",
        VERA_MCP__AUTH_ISSUER="https://auth.vera.audit",
        VERA_MCP__AUTH_AUDIENCE="https://mcp.vera.audit",
        VERA_OBSERVABILITY__AUDIT_HEAD_SECONDS="0.5",
    )
    with launch(data_dir, env) as running:
        yield running


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def admin_key(audited: LaunchedStack) -> str:
    created = audited.vera("admin", "create-user", "--name", "root", "--admin",
                           "--data-dir", str(audited.data_dir))
    assert created.returncode == 0, created.stderr
    fields = dict(line.split(":", 1) for line in created.stdout.splitlines() if ":" in line)
    return fields["api_key"].strip()


def test_the_trail_records_reads_and_verifies(audited: LaunchedStack, admin_key: str) -> None:
    base = json.loads((audited.data_dir / "run" / "stack.json").read_text())["api_url"]
    member = httpx.post(f"{base}/identity/register", json={"display_name": "m"}).json()
    for _ in range(20):
        assert httpx.get(f"{base}/identity/me", headers=bearer(BOGUS)).status_code == 401

    deadline, records = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        page = httpx.get(f"{base}/audit/identity", headers=bearer(admin_key),
                         params={"page_size": 500})
        assert page.status_code == 200, page.text
        records = page.json()["records"]
        if any(r["action"] == "authentication.failed" for r in records):
            break
        time.sleep(0.3)
    actions = [r["action"] for r in records]
    assert actions.count("user.created") == 2 and actions.count("api_key.minted") >= 2
    failed = [r for r in records if r["action"] == "authentication.failed"]
    assert failed and sum(int(r["targets"]["count"]) for r in failed) <= 20
    assert {r["targets"]["reason"] for r in failed} == {"unknown_key"}
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    exported = json.dumps(records)
    assert admin_key not in exported and member["api_key"] not in exported
    assert BOGUS not in exported
    # Filtered, and administrators only.
    only = httpx.get(f"{base}/audit/identity", headers=bearer(admin_key),
                     params={"action": "user.created"}).json()["records"]
    assert [r["action"] for r in only] == ["user.created", "user.created"]
    refused = httpx.get(f"{base}/audit/identity", headers=bearer(member["api_key"]))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "unauthorized"
    assert httpx.get(f"{base}/audit/retrieval", headers=bearer(admin_key)).status_code == 400

    verified = audited.vera("audit", "verify", "--data-dir", str(audited.data_dir))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "identity: " in verified.stdout and "chain intact" in verified.stdout

    async def alter_record_two() -> None:
        pg = EmbeddedPostgres(audited.data_dir)
        pg.start()  # the stack's own server, already running
        conn = await asyncpg.connect(pg.dsn(), server_settings={"search_path": "identity"})
        try:
            await conn.execute("SET session_replication_role = replica")
            await conn.execute("UPDATE audit_log SET actor = 'someone-else' WHERE seq = 2")
        finally:
            await conn.close()

    asyncio.run(alter_record_two())
    broken = audited.vera("audit", "verify", "--data-dir", str(audited.data_dir))
    assert broken.returncode == 1
    assert "identity: BROKEN at record 2 (altered)" in broken.stdout


def test_minting_disabling_and_refusals_reach_the_trail(
    audited: LaunchedStack, admin_key: str
) -> None:
    base = json.loads((audited.data_dir / "run" / "stack.json").read_text())["api_url"]
    member = httpx.post(f"{base}/identity/register", json={"display_name": "leaver"}).json()
    minted = httpx.post(f"{base}/identity/mcp-token", headers=bearer(member["api_key"]))
    assert minted.status_code == 200, minted.text
    for _ in range(5):  # refused: not an administrator
        refused = httpx.get(f"{base}/audit/identity", headers=bearer(member["api_key"]))
        assert refused.status_code == 403
    pid = member["principal_id"]
    for verb in ("disable", "enable"):
        changed = httpx.post(f"{base}/identity/users/{pid}/{verb}", headers=bearer(admin_key))
        assert changed.status_code == 200, changed.text

    deadline, records = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        records = httpx.get(f"{base}/audit/identity", headers=bearer(admin_key),
                            params={"page_size": 500}).json()["records"]
        if refused_count(records) >= 6:
            break
        time.sleep(0.3)
    minting = [r for r in records if r["action"] == "mcp_token.minted"]
    assert [(r["actor"], set(r["targets"])) for r in minting] == [(pid, {"key_id"})]
    assert minted.json()["token"] not in json.dumps(records)
    changes = [(r["action"], r["targets"]["principal_id"]) for r in records
               if r["action"] in {"user.disabled", "user.enabled"}]
    assert changes == [("user.disabled", pid), ("user.enabled", pid)]
    refusals = [r for r in records if r["action"] == "authorization.refused"]
    assert {(r["actor"], r["targets"]["source"], r["targets"]["reason"]) for r in refusals} \
        == {("-", "api", "unauthorized")}
    # One refused read in the test before, five here: counted, in fewer records.
    assert refused_count(records) == 6 and len(refusals) < 6


def refused_count(records: list[dict]) -> int:
    return sum(int(r["targets"]["count"]) for r in records
               if r["action"] == "authorization.refused")
