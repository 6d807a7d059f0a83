"""The JSONL file is validated whole, with line numbers, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vera.ingest_records import IngestFileError, parse_jsonl


def write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "k.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line)
                              for line in lines) + "\n")
    return path


SOURCE = {"type": "source", "id": "adr-7", "source_type": "adr", "title": "ADR 7",
          "uri": "https://wiki/adr/7", "observed_at": "2025-01-02T00:00:00Z"}
FACT = {"type": "fact", "subject": "payments-api", "predicate": "uses_database",
        "object": "PostgreSQL", "source": "adr-7", "evidence": "…", "locator": "L10-L20",
        "valid_from": "2025-01-02T00:00:00Z", "valid_to": None, "trust_tier": 1,
        "authority": 0.9, "repository": "git@github.com:Acme/Payments.git", "branch": "main",
        "code_path": "services/payments", "document_type": "adr"}


def test_a_full_file_parses_into_inputs(tmp_path: Path):
    parsed = parse_jsonl(write(tmp_path, SOURCE, "", FACT,
                               {"type": "entity", "name": "payments-api", "aliases": ["pay"]}))
    assert [s.source_id for s in parsed.sources] == ["adr-7"]
    fact = parsed.facts[0]
    assert fact.trust_tier == 1 and fact.HasField("trust_tier")
    assert fact.repository == "github.com/Acme/Payments"
    assert fact.valid_from.ToJsonString() == "2025-01-02T00:00:00Z"
    assert not fact.HasField("valid_to")
    assert parsed.fact_lines == [3]
    assert parsed.repositories == {"github.com/Acme/Payments"}


def test_only_subject_predicate_object_are_required(tmp_path: Path):
    parsed = parse_jsonl(write(tmp_path, {"type": "fact", "subject": "a", "predicate": "b",
                                          "object": "c"}))
    assert not parsed.facts[0].HasField("trust_tier")
    assert not parsed.facts[0].HasField("authority")


@pytest.mark.parametrize(("bad", "expected"), [
    ("{not json", "invalid JSON"),
    ({"type": "fact", "subject": "a", "predicate": "b"}, "object: required"),
    ({**FACT, "trust_tier": 5}, "trust_tier"),
    ({**FACT, "trust_tier": True}, "trust_tier"),
    ({**FACT, "authority": 1.5}, "authority"),
    ({**FACT, "valid_from": "yesterday"}, "valid_from"),
    ({**FACT, "valid_to": "2024-01-01T00:00:00Z"}, "valid_to"),
    ({**FACT, "repository": "/home/me/src/payments"}, "repository"),
    ({**FACT, "colour": "blue"}, "colour"),
    ({"type": "note"}, "type"),
    ([1, 2], "JSON object"),
    ({**SOURCE}, "duplicate"),
    # the service's bounds (vera.limits), caught with the line before anything is sent
    ({**FACT, "object": "x" * 2049}, "object"),
    ({"type": "entity", "name": "n" * 513}, "name"),
])
def test_a_bad_line_rejects_the_file_naming_line_and_field(tmp_path: Path, bad, expected):
    with pytest.raises(IngestFileError) as caught:
        parse_jsonl(write(tmp_path, SOURCE, FACT, bad))
    [(line, reason)] = caught.value.errors
    assert line == 3
    assert expected in reason


def test_every_bad_line_is_reported_in_order(tmp_path: Path):
    with pytest.raises(IngestFileError) as caught:
        parse_jsonl(write(tmp_path, {**FACT, "trust_tier": 9}, SOURCE, {"type": "x"}))
    assert [line for line, _ in caught.value.errors] == [1, 3]


def test_sources_the_file_does_not_define_are_kept_with_their_lines(tmp_path: Path):
    """A fact may cite a source an earlier file recorded in the project; the CLI
    (``vera.commands.ingest``) checks them against the project before writing anything."""
    parsed = parse_jsonl(write(tmp_path, SOURCE, FACT, {**FACT, "source": "adr-1"},
                               {**FACT, "object": "MySQL", "source": "adr-1"}))
    assert parsed.cited_sources == {"adr-1": [3, 4]}
    assert [f.source_id for f in parsed.facts] == ["adr-7", "adr-1", "adr-1"]


def test_an_empty_file_is_rejected(tmp_path: Path):
    with pytest.raises(IngestFileError):
        parse_jsonl(write(tmp_path, ""))


def test_correction_lines_parse_with_the_key_they_correct(tmp_path):
    path = tmp_path / "fix.jsonl"
    path.write_text(
        '{"type":"source","id":"adr-8"}\n'
        '{"type":"correction","corrects":"fk_abc","subject":"payments",'
        '"predicate":"uses_database","object":"PostgreSQL 16","source":"adr-8",'
        '"valid_from":"2025-06-01T00:00:00Z","reason":"migrated"}\n'
    )
    parsed = parse_jsonl(path)
    ((key, replacement, reason),) = parsed.corrections
    assert (key, replacement.object, replacement.source_id, reason) == (
        "fk_abc", "PostgreSQL 16", "adr-8", "migrated"
    )
    assert parsed.facts == []
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"correction","subject":"a","predicate":"b","object":"c"}\n')
    with pytest.raises(IngestFileError) as err:
        parse_jsonl(bad)
    assert err.value.errors[0][0] == 1


def _ingest_args(*argv: str):
    import argparse

    from vera.commands import ingest

    parser = argparse.ArgumentParser()
    ingest.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["ingest", *argv])


def test_vera_ingest_exits_2_naming_the_lines_when_a_cited_source_is_unknown(
    tmp_path: Path, capsys
):
    """The project's sources are asked for before anything is sent; an unknown one is
    reported like a bad line, and no ingest request follows."""
    import httpx

    from vera.commands import ingest
    from vera.config import Settings

    seen: list[str] = []

    def api(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return httpx.Response(400, json={"error": {"code": "invalid_input",
                                                   "field": "source_id"}})

    path = write(tmp_path, {**FACT, "source": "adr-1"})
    args = _ingest_args(str(path), "--project", "payments", "--api-url", "http://127.0.0.1:9")
    assert ingest.run(args, Settings(), transport=httpx.MockTransport(api)) == 2
    err = capsys.readouterr().err
    assert "nothing was written" in err and "line 1: source" in err
    assert seen == ["GET /curation/projects/payments/sources/adr-1"]


def test_without_a_running_stack_or_api_url_ingest_stops(tmp_path: Path, capsys):
    from vera.commands import ingest
    from vera.config import Settings

    args = _ingest_args(str(write(tmp_path, FACT)), "--project", "payments",
                        "--data-dir", str(tmp_path / "no-stack"))
    assert ingest.run(args, Settings()) == 1
    assert "--api-url" in capsys.readouterr().err


def test_waiting_for_the_index_is_paced_and_outlasts_a_slow_index():
    """Indexing that keeps moving is waited for however long it takes, polled no more
    often than ``poll_delays`` allows; one that stops moving ends the wait."""
    import httpx

    from vera.api_client import POLL_MOST_SECONDS, ApiClient, ClientStop
    from vera.commands import ingest

    positions = iter(range(0, 2001, 100))  # 21 polls, each a step further

    def api(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"indexed_position": next(positions, 2000)})

    slept: list[float] = []
    with ApiClient("http://127.0.0.1:9", transport=httpx.MockTransport(api),
                   sleep=slept.append) as client:
        ingest.wait_until_indexed(client, "payments", 2000, lambda *_: None, stall=1e9)
    assert len(slept) == 20 and max(slept) == POLL_MOST_SECONDS
    assert slept == sorted(slept)

    stuck = ApiClient("http://127.0.0.1:9", sleep=lambda _: None, transport=httpx.MockTransport(
        lambda r: httpx.Response(200, json={"indexed_position": 5})))
    with stuck, pytest.raises(ClientStop) as stop:
        ingest.wait_until_indexed(stuck, "payments", 10, lambda *_: None, stall=0.0)
    assert stop.value.exit_code == 1
