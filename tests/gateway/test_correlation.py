"""Every structured error a client receives carries an id in ``data`` (``request_id``
while tracing is off) and the gateway's log line about it carries the same; logs can be
one JSON object per line (VERA_OBSERVABILITY__LOG_FORMAT=json)."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator

import pytest
from harness import mcp_client

from vera.config import Settings
from vera.logs import configure_logging
from vera.observability import correlation

HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(params=["text", "json"])
def process_log(request, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, io.StringIO]]:
    """stderr as an entrypoint configures it, in each format."""
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", "mcp", request.param, correlation.log_fields)
    yield request.param, stderr
    root.handlers[:] = handlers
    root.setLevel(level)


def lines_with(log: str, log_format: str, request_id: str) -> list[str]:
    if log_format == "text":
        suffix = f" request_id={request_id}"
        return [line.split(": ", 1)[1].removesuffix(suffix) for line in log.splitlines()
                if line.endswith(suffix)]
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [r["message"] for r in records if r.get("request_id") == request_id]


async def test_an_error_and_its_log_line_carry_the_same_request_id(
    gateway, call_error, process_log
):
    log_format, stderr = process_log
    async with mcp_client(gateway.url) as client:
        first = await call_error(client, "knowledge_search", {"query": "q", "limit": 0})
        second = await call_error(client, "knowledge_search", {"query": "q", "limit": 0})
    ids = [error.data["request_id"] for error in (first, second)]
    assert all(HEX_ID.fullmatch(i) for i in ids) and ids[0] != ids[1]
    assert first.data["code"] == "invalid_input" and "trace_id" not in first.data
    for request_id in ids:
        assert lines_with(stderr.getvalue(), log_format, request_id) == [
            "answered invalid_input"]


def test_the_log_format_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERA_OBSERVABILITY__LOG_FORMAT", "json")
    assert Settings().observability.log_format == "json"
    monkeypatch.setenv("VERA_OBSERVABILITY__LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="log_format"):
        Settings()
