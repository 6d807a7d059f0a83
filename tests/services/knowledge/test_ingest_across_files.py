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
import os
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from harness import serve_app, serve_service

from vera import cli
from vera.api.app import build_app
from vera.config import ApiSettings, DatabaseSettings, ServiceAddresses, Settings
from vera.local_secret import ensure_secret
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.services.identity import server as identity_server
from vera.services.knowledge import server as knowledge_server


class _Indexed(retrieval_pb2_grpc.RetrievalServiceServicer):
    async def GetIndexStatus(self, request, context):
        return retrieval_pb2.GetIndexStatusResponse(indexed_position=2**62, head_position=0)


@pytest.fixture
async def stack_dir(pg_dsn: str, tmp_path: Path) -> AsyncIterator[Path]:
    """The data dir of a (partly stand-in) running stack: its secret and its stack.json."""
    data_dir = tmp_path / "data"
    service_settings = Settings(database=DatabaseSettings(dsn=pg_dsn, pool_max_size=4))
    retrieval = create_server(
        [
            ServiceBinding(
                "vera.retrieval.v1.RetrievalService",
                _Indexed(),
                retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server,
            )
        ],
        "127.0.0.1:0",
    )
    async with (
        serve_service(identity_server, service_settings) as identity,
        serve_service(knowledge_server, service_settings) as knowledge,
    ):
        await retrieval.server.start()
        await mark_serving(retrieval)
        fake = f"127.0.0.1:{retrieval.port}"
        api = build_app(Settings(
            environment="local", api=ApiSettings(local_secret=ensure_secret(data_dir)),
            services=ServiceAddresses(
                identity=identity, knowledge=knowledge, retrieval=fake, snapshot=fake)))
        try:
            async with serve_app(api) as url:
                (data_dir / "run").mkdir()
                (data_dir / "run" / "stack.json").write_text(
                    json.dumps({"pid": os.getpid(), "api_url": url}))
                yield data_dir
        finally:
            await retrieval.stop(0)


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
    assert [line.split(":")[0].strip() for line in err.splitlines()[1:]] == ["line 2", "line 4"]
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
