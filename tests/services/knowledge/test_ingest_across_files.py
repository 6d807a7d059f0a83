"""`vera ingest` files may cite sources an earlier file recorded in the project; a source
neither the file nor the project has still rejects the file with its line numbers before
anything is written. Real identity and knowledge services; retrieval is a stand-in that
reports everything indexed (indexing is not what is under test)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from harness import serve_service

from vera.config import DatabaseSettings, ServiceAddresses, Settings
from vera.ingest import IngestFileError, ingest_file, parse_jsonl
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.services.identity import server as identity_server
from vera.services.knowledge import server as knowledge_server


class _Indexed(retrieval_pb2_grpc.RetrievalServiceServicer):
    async def GetIndexStatus(self, request, context):
        return retrieval_pb2.GetIndexStatusResponse(indexed_position=2**62, head_position=0)


@pytest.fixture
async def settings(pg_dsn: str) -> AsyncIterator[Settings]:
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
        try:
            yield Settings(
                services=ServiceAddresses(
                    identity=identity, knowledge=knowledge, retrieval=fake, snapshot=fake
                )
            )
        finally:
            await retrieval.stop(0)


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
    settings, tmp_path: Path, pg_dsn: str
) -> None:
    first = parse_jsonl(_file(tmp_path, "a.jsonl", ADR, _fact("ledger", "adr-7")))
    await ingest_file(settings, first, "payments")
    second = parse_jsonl(_file(tmp_path, "b.jsonl", _fact("kafka", "adr-7")))
    summary = await ingest_file(settings, second, "payments")
    assert summary.facts == (1, 0)
    assert await _facts(pg_dsn) == [("kafka", "adr-7"), ("ledger", "adr-7")]


async def test_an_unknown_source_rejects_the_file_with_its_lines_and_writes_nothing(
    settings, tmp_path: Path, pg_dsn: str
) -> None:
    await ingest_file(
        settings, parse_jsonl(_file(tmp_path, "a.jsonl", ADR, _fact("ledger", "adr-7"))),
        "payments",
    )
    bad = parse_jsonl(
        _file(tmp_path, "b.jsonl", _fact("kafka", "adr-7"), _fact("redis", "adr-404"),
              {"type": "source", "id": "rb-1"}, _fact("vault", "adr-404"))
    )
    with pytest.raises(IngestFileError) as caught:
        await ingest_file(settings, bad, "payments")
    assert [line for line, _ in caught.value.errors] == [2, 4]
    assert all("adr-404" in reason for _, reason in caught.value.errors)
    assert await _facts(pg_dsn) == [("ledger", "adr-7")]
    # In a project that does not exist yet, every cited source is unknown.
    with pytest.raises(IngestFileError) as caught:
        await ingest_file(
            settings, parse_jsonl(_file(tmp_path, "c.jsonl", _fact("x", "adr-7"))), "billing"
        )
    assert [line for line, _ in caught.value.errors] == [1]


async def test_hidden_characters_are_flagged_with_the_fact_line(settings, tmp_path) -> None:
    parsed = parse_jsonl(
        _file(tmp_path, "a.jsonl", {**ADR, "title": "ADR\u200b7"}, _fact("ledger", "adr-7"),
              _fact("kafka\u202e", "adr-7"))
    )
    summary = await ingest_file(settings, parsed, "payments")
    assert summary.facts == (2, 0)
    assert summary.warnings == [
        (0, "sources[0].title: hidden_character U+200B"),
        (3, "object: hidden_character U+202E"),
        (3, "evidence: hidden_character U+202E"),
    ]
