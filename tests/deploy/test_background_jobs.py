"""The switches a deployment uses to run background work in exactly one pod.

The chart runs the snapshot sweeper and the knowledge community refresh only in their
singleton maintenance Deployments; every serving replica turns them off with 0.
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from pydantic import SecretStr

from vera.config import Settings
from vera.services.retrieval.vectors.qdrant import open_client
from vera.services.snapshot import server as snapshot_server


def _task_names() -> set[str]:
    return {task.get_name() for task in asyncio.all_tasks()}


async def _snapshot_tasks(dsn: str, sweep_interval_seconds: float) -> set[str]:
    settings = Settings(
        database={"dsn": dsn}, snapshot={"sweep_interval_seconds": sweep_interval_seconds}
    )
    hosted = await snapshot_server.create(settings, "127.0.0.1:0")
    try:
        return _task_names()
    finally:
        await hosted.running.stop(grace=0)
        await hosted.aclose()


async def test_a_zero_sweep_interval_starts_no_sweeper(pg_dsn: str) -> None:
    assert "snapshot-sweeper" not in await _snapshot_tasks(pg_dsn, 0)


async def test_a_positive_sweep_interval_starts_the_sweeper(pg_dsn: str) -> None:
    assert "snapshot-sweeper" in await _snapshot_tasks(pg_dsn, 3600)


class _QdrantStandIn(BaseHTTPRequestHandler):
    """Answers Qdrant's version probe and records the api-key header it carried."""

    seen: ClassVar[queue.Queue[str | None]] = queue.Queue()

    def do_GET(self) -> None:
        self.seen.put(self.headers.get("api-key"))
        body = json.dumps({"title": "qdrant", "version": "1.20.0"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_qdrant_api_key_reaches_the_server(tmp_path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _QdrantStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.warns(UserWarning):  # qdrant-client: an api key over plain http
            client = open_client(url, tmp_path, SecretStr("k" * 32))
        try:
            assert _QdrantStandIn.seen.get(timeout=10) == "k" * 32
        finally:
            client.close()
    finally:
        server.shutdown()
        server.server_close()


def test_the_qdrant_api_key_is_read_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("VERA_RETRIEVAL__QDRANT_API_KEY", "from-a-secret")
    key = Settings().retrieval.qdrant_api_key
    assert key is not None and key.get_secret_value() == "from-a-secret"
