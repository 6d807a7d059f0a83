"""`vera harvest` as a developer runs it against a local stack (`vera up`'s REST API over
real identity and knowledge services on the test database, found through the data dir's
stack.json and authenticated by its secret): facts with their file as source, the commit
as the source's version, line locators, exact evidence, the commit's time and the
repository binding; a second run duplicates nothing; later commits are kept current."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
from git_fixtures import IDENTITY, FixtureRepo
from harness import local_api_stack

from vera import cli

PROJECT = "shop"
PYPROJECT = (
    "[project]\n"
    "name = \"payments-api\"\n"
    "version = \"1.4.2\"\n"
    "dependencies = [\n"
    "  \"fastapi>=0.110\",\n"
    "  \"asyncpg==0.29.0\",\n"
    "]\n"
)
COMPOSE = "services:\n  db:\n    image: postgres:16\n"


@pytest.fixture
async def stack_dir(pg_dsn: str, tmp_path: Path) -> AsyncIterator[Path]:
    async with local_api_stack(pg_dsn, tmp_path / "data") as data_dir:
        yield data_dir


async def harvest(stack_dir: Path, repo: FixtureRepo, capsys: pytest.CaptureFixture,
                  *more: str) -> tuple[int, dict]:
    code = await asyncio.to_thread(
        cli.main, ["harvest", str(repo.root), "--project", PROJECT, "--data-dir",
                   str(stack_dir), "--json", *more])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


async def rows(pg_dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(pg_dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


LIVE_FACTS = """
    SELECT f.fact_key, f.subject, f.predicate, f.object, f.valid_from, f.valid_to,
           f.repository, f.branch, f.code_path, f.document_type, s.source_id, s.uri,
           s.observed_at, e.locator, e.text AS evidence
    FROM knowledge.facts f
    JOIN knowledge.assertions a ON a.fact_key = f.fact_key
    JOIN knowledge.sources s ON s.source_pk = a.source_pk
    JOIN knowledge.evidence e ON e.assertion_id = a.assertion_id
    WHERE f.superseded_at IS NULL AND f.state = 'ACTIVE'
    ORDER BY f.predicate, f.object, e.locator
"""


async def test_a_publish_cites_each_file_at_its_commit_and_a_rerun_adds_nothing(
        stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture) -> None:
    repo = FixtureRepo(tmp_path / "shop")
    commit = repo.commit({"services/api/pyproject.toml": PYPROJECT, "compose.yaml": COMPOSE})
    code, report = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0, report
    (outcome,) = report["commits"]
    assert outcome["commit"] == commit and outcome["plan"]["new"] == outcome["facts"] == 6
    assert outcome["loaded"]["created"] == 6 and outcome["sources"]["created"] == 2

    facts = await rows(pg_dsn, LIVE_FACTS)
    assert len(facts) == 6
    by_object = {r["object"]: r for r in facts}
    asyncpg_fact = by_object["asyncpg==0.29.0"]
    assert asyncpg_fact["source_id"] == f"{IDENTITY}/services/api/pyproject.toml"
    assert asyncpg_fact["uri"] == (f"https://{IDENTITY}/blob/{commit}/"
                                   "services/api/pyproject.toml")
    assert asyncpg_fact["locator"] == "L6"
    assert asyncpg_fact["evidence"] == PYPROJECT.splitlines()[5]
    when = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert asyncpg_fact["valid_from"] == when and asyncpg_fact["observed_at"] == when
    assert (asyncpg_fact["repository"], asyncpg_fact["branch"], asyncpg_fact["code_path"]) \
        == (IDENTITY, "main", "services/api")
    assert asyncpg_fact["document_type"] == "dependencies"
    assert by_object["postgres:16"]["code_path"] == ""

    code, again = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0
    (outcome,) = again["commits"]
    assert outcome["plan"]["unchanged"] == 6 and outcome["loaded"]["created"] == 0
    assert outcome["loaded"]["deduplicated"] == 6
    assert len(await rows(pg_dsn, LIVE_FACTS)) == 6


def state_file(stack_dir: Path) -> Path:
    (found,) = (stack_dir / "harvest").glob("*.json")
    return found


async def test_a_later_commit_dedups_corrects_and_closes_and_an_interrupted_run_resumes(
        stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture) -> None:
    repo = FixtureRepo(tmp_path / "shop")
    repo.commit({"services/api/pyproject.toml": PYPROJECT, "compose.yaml": COMPOSE})
    assert (await harvest(stack_dir, repo, capsys, "--publish"))[0] == 0
    first_state = state_file(stack_dir).read_bytes()
    # The next commit bumps asyncpg and drops fastapi.
    repo.commit({"services/api/pyproject.toml": PYPROJECT.replace("0.29.0", "0.30.0")
                 .replace("  \"fastapi>=0.110\",\n", "")})
    code, report = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0, report
    (outcome,) = report["commits"]
    assert outcome["plan"] == {"new": 0, "unchanged": 3, "changed": 1, "vanished": 2}
    assert outcome["loaded"]["corrections_applied"] == 3

    second = datetime(2026, 1, 2, 12, tzinfo=UTC)
    live = {(r["predicate"], r["object"]): r for r in await rows(pg_dsn, LIVE_FACTS)}
    assert live[("depends_on", "asyncpg==0.30.0")]["valid_from"] == second
    assert live[("depends_on", "asyncpg==0.30.0")]["locator"] == "L5"
    # The old value held until the commit that changed it: answerable as of before it.
    assert live[("depends_on", "asyncpg==0.29.0")]["valid_to"] == second
    assert live[("depends_on", "fastapi>=0.110")]["valid_to"] == second
    assert live[("built_with", "fastapi")]["valid_to"] == second
    assert live[("uses_image", "postgres:16")]["valid_to"] is None
    changes = await rows(pg_dsn, "SELECT count(*) AS n FROM knowledge.facts "
                                 "WHERE corrects <> ''")
    assert changes[0]["n"] >= 3

    # Interrupted before its state was saved: the same run again writes nothing twice.
    before = len(await rows(pg_dsn, "SELECT 1 FROM knowledge.facts"))
    state_file(stack_dir).write_bytes(first_state)
    code, report = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0, report
    loaded = report["commits"][0]["loaded"]
    assert loaded["created"] == 0 and loaded["corrections_applied"] == 0
    assert loaded["corrections_already_recorded"] == 3
    assert len(await rows(pg_dsn, "SELECT 1 FROM knowledge.facts")) == before


async def test_since_walks_the_history_commit_by_commit(
        stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture) -> None:
    repo = FixtureRepo(tmp_path / "shop")
    first = repo.commit({"compose.yaml": COMPOSE})
    middle = repo.commit({"compose.yaml": COMPOSE.replace("16", "17")})
    last = repo.commit({"compose.yaml": COMPOSE.replace("16", "18")})
    code, report = await harvest(stack_dir, repo, capsys, "--publish", "--since", first)
    assert code == 0, report
    assert [c["commit"] for c in report["commits"]] == [middle, last]
    assert [c["plan"]["changed"] for c in report["commits"]] == [0, 1]
    images = {r["object"]: (r["valid_from"], r["valid_to"])
              for r in await rows(pg_dsn, LIVE_FACTS) if r["predicate"] == "uses_image"}
    assert images == {
        "postgres:17": (datetime(2026, 1, 2, 12, tzinfo=UTC), datetime(2026, 1, 3, 12, tzinfo=UTC)),
        "postgres:18": (datetime(2026, 1, 3, 12, tzinfo=UTC), None)}


def test_check_reports_the_facts_whose_cited_lines_changed_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A CI job's check: no API, no earlier harvest; the facts stated at the base commit
    whose lines changed (or vanished) at HEAD, exit 3; unchanged lines, exit 0."""
    repo = FixtureRepo(tmp_path / "shop")
    base = repo.commit({"services/api/pyproject.toml": PYPROJECT, "compose.yaml": COMPOSE})
    repo.commit({"README.md": "docs only\n"})
    check = ["harvest", str(repo.root), "--project", PROJECT, "--check", "--since", base,
             "--data-dir", str(tmp_path / "none"), "--json"]
    assert cli.main(check) == 0
    assert json.loads(capsys.readouterr().out)["drift"] == []
    repo.commit({"services/api/pyproject.toml": PYPROJECT.replace("0.29.0", "0.30.0"),
                 "compose.yaml": None})
    assert cli.main(check) == 3
    drift = {(d["source"], d["locator"], d["predicate"], d["reason"])
             for d in json.loads(capsys.readouterr().out)["drift"]}
    pyproject, compose = (f"{IDENTITY}/services/api/pyproject.toml", f"{IDENTITY}/compose.yaml")
    assert drift == {(pyproject, "L6", "depends_on", "lines_changed"),
                     (pyproject, "L6", "uses_database_driver", "lines_changed"),
                     (compose, "L3", "uses_image", "lines_vanished")}
    assert not (tmp_path / "none").exists()


async def test_check_after_a_publish_compares_with_it_and_without_one_says_so(
        stack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    repo = FixtureRepo(tmp_path / "shop")
    repo.commit({"compose.yaml": COMPOSE})
    code, _ = await harvest(stack_dir, repo, capsys, "--check")
    assert code == 2  # nothing harvested yet: refused, naming --since
    assert (await harvest(stack_dir, repo, capsys, "--publish"))[0] == 0
    repo.commit({"compose.yaml": COMPOSE.replace("16", "17")})
    code, report = await harvest(stack_dir, repo, capsys, "--check")
    assert code == 3
    assert [(d["locator"], d["reason"]) for d in report["drift"]] == [("L3", "lines_changed")]


async def test_without_publish_the_facts_are_proposed_for_the_curators_with_their_lines(
        stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture) -> None:
    repo = FixtureRepo(tmp_path / "shop")
    repo.commit({"compose.yaml": COMPOSE})
    assert (await harvest(stack_dir, repo, capsys, "--publish"))[0] == 0  # makes the project
    repo.commit({"services/api/pyproject.toml": PYPROJECT})
    code, report = await harvest(stack_dir, repo, capsys)
    assert code == 0, report
    (outcome,) = report["commits"]
    # The compose fact is the project's already; the five of pyproject.toml are proposed.
    assert outcome["proposed"] == {"created": 5, "deduplicated": 1}
    assert outcome["missing_predicates"] == []
    pending = await rows(pg_dsn, """
        SELECT f.object, e.locator, e.text FROM knowledge.facts f
        JOIN knowledge.proposal_targets t ON t.version_id = f.version_id
        JOIN knowledge.assertions a ON a.fact_key = f.fact_key AND a.status = 'pending'
        JOIN knowledge.evidence e ON e.assertion_id = a.assertion_id
        WHERE f.state = 'PROPOSED' AND f.superseded_at IS NULL ORDER BY f.object""")
    assert ("asyncpg==0.29.0", "L6", '  "asyncpg==0.29.0",') in [tuple(r) for r in pending]
    assert len(pending) == 5
    code, again = await harvest(stack_dir, repo, capsys)
    assert again["commits"][0]["proposed"] == {"created": 0, "deduplicated": 6}


async def test_a_publish_marks_citations_whose_lines_moved_and_clears_them_when_back(
        stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture) -> None:
    repo = FixtureRepo(tmp_path / "shop")
    repo.commit({"compose.yaml": COMPOSE})
    code, first = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0 and first["drift_marks"] == {"cited": 1, "marked": 0, "cleared": 0}
    # A comment above moves the image's line: same fact, its cited line is now another.
    repo.commit({"compose.yaml": "# db\n" + COMPOSE})
    code, moved = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0 and moved["drift_marks"]["marked"] == 1
    marks = await rows(pg_dsn, "SELECT drift_reason FROM knowledge.assertions "
                               "WHERE drift_reason <> ''")
    assert [r["drift_reason"] for r in marks] == ["lines_changed"]
    repo.commit({"compose.yaml": COMPOSE})
    code, back = await harvest(stack_dir, repo, capsys, "--publish")
    assert code == 0 and back["drift_marks"]["cleared"] == 1
    assert not await rows(pg_dsn, "SELECT 1 FROM knowledge.assertions WHERE drift_reason <> ''")
