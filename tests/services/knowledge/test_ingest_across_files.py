"""`vera ingest` files may cite sources an earlier file recorded in the project; a source
neither the file nor the project has still rejects the file with its line numbers before
anything is written. The real CLI against the real REST API (local-dev profile) over real
identity and knowledge services, found as `vera ingest --data-dir` finds a running stack
(its stack.json), and authenticated by the data dir's secret the CLI reads itself;
retrieval is a stand-in that reports everything indexed (indexing is not what is under
test)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from harness import local_api_stack

from vera import cli


@pytest.fixture
async def stack_dir(pg_dsn: str, tmp_path: Path) -> AsyncIterator[Path]:
    async with local_api_stack(pg_dsn, tmp_path / "data") as data_dir:
        yield data_dir


async def _ingest(stack_dir: Path, path: Path, project: str, *more: str) -> int:
    """`vera ingest` as a person runs it (a blocking client: off the test's loop)."""
    return await asyncio.to_thread(
        cli.main, ["ingest", str(path), "--project", project, "--data-dir", str(stack_dir),
                   *more])


def _file(tmp_path: Path, name: str, *records: dict) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


ADR = {"type": "source", "id": "adr-7", "source_type": "adr", "title": "ADR 7"}


def _fact(obj: str, source: str) -> dict:
    return {"type": "fact", "subject": "payments-api", "predicate": "depends_on",
            "object": obj, "source": source, "evidence": f"uses {obj}"}


async def _facts(pg_dsn: str) -> list[tuple[str, str]]:
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch(
            """SELECT f.object, s.source_id FROM knowledge.facts f
               JOIN knowledge.assertions a ON a.fact_key = f.fact_key
               JOIN knowledge.sources s ON s.source_pk = a.source_pk
               WHERE f.superseded_at IS NULL ORDER BY f.object"""
        )
        return [tuple(r) for r in rows]
    finally:
        await conn.close()


async def test_a_later_file_cites_a_source_an_earlier_file_recorded(
    stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys
) -> None:
    assert await _ingest(stack_dir, _file(tmp_path, "a.jsonl", ADR, _fact("ledger", "adr-7")),
                         "payments") == 0
    capsys.readouterr()
    assert await _ingest(stack_dir, _file(tmp_path, "b.jsonl", _fact("kafka", "adr-7")),
                         "payments", "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["facts"] == {"created": 1, "deduplicated": 0}
    assert [k["line"] for k in summary["fact_keys"]] == [1]
    assert await _facts(pg_dsn) == [("kafka", "adr-7"), ("ledger", "adr-7")]


async def test_an_unknown_source_rejects_the_file_with_its_lines_and_writes_nothing(
    stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys
) -> None:
    assert await _ingest(stack_dir, _file(tmp_path, "a.jsonl", ADR, _fact("ledger", "adr-7")),
                         "payments") == 0
    capsys.readouterr()
    bad = _file(tmp_path, "b.jsonl", _fact("kafka", "adr-7"), _fact("redis", "adr-404"),
                {"type": "source", "id": "rb-1"}, _fact("vault", "adr-404"))
    assert await _ingest(stack_dir, bad, "payments") == 2
    err = capsys.readouterr().err
    # (the in-process API's own log lines share the stream)
    assert [line.split(":")[0].strip() for line in err.splitlines()
            if line.startswith("  line")] == ["line 2", "line 4"]
    assert "adr-404" in err
    assert await _facts(pg_dsn) == [("ledger", "adr-7")]
    # In a project that does not exist yet, every cited source is unknown.
    assert await _ingest(stack_dir, _file(tmp_path, "c.jsonl", _fact("x", "adr-7")),
                         "billing") == 2
    assert "line 1: source" in capsys.readouterr().err


async def test_hidden_characters_are_flagged_with_the_fact_line(
    stack_dir: Path, tmp_path: Path, capsys
) -> None:
    path = _file(tmp_path, "a.jsonl", {**ADR, "title": "ADR\u200b7"}, _fact("ledger", "adr-7"),
                 _fact("kafka\u202e", "adr-7"))
    assert await _ingest(stack_dir, path, "payments", "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["facts"] == {"created": 2, "deduplicated": 0}
    assert summary["warnings"] == [
        {"line": 0, "warning": "sources[0].title: hidden_character U+200B"},
        {"line": 3, "warning": "object: hidden_character U+202E"},
        {"line": 3, "warning": "evidence: hidden_character U+202E"},
    ]


async def test_the_fact_keys_printed_are_the_keys_a_correction_line_names(
    stack_dir: Path, tmp_path: Path, pg_dsn: str, capsys
) -> None:
    assert await _ingest(stack_dir, _file(tmp_path, "a.jsonl", ADR, _fact("ledger", "adr-7")),
                         "payments") == 0
    out = capsys.readouterr().out
    (key,) = [line.split(": ")[1] for line in out.splitlines() if line.startswith("  2: ")]
    correction = {"type": "correction", "corrects": key, "subject": "payments-api",
                  "predicate": "depends_on", "object": "journal", "source": "adr-7",
                  "reason": "renamed"}
    assert await _ingest(stack_dir, _file(tmp_path, "b.jsonl", correction), "payments",
                         "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["corrections"] == {"applied": 1, "already_recorded": 0}
    assert [k["line"] for k in summary["correction_fact_keys"]] == [1]
    assert ("journal", "adr-7") in await _facts(pg_dsn)
