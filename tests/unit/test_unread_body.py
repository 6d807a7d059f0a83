"""ClosesOnUnreadBody: an answer that starts before the request's body was read to its end
says Connection: close; one that starts after, or to a request without a body, does not."""

from __future__ import annotations

import pytest
from starlette.types import Message, Receive, Scope, Send

from vera.entrypoints.unread_body import ClosesOnUnreadBody


def request(headers: list[tuple[bytes, bytes]]) -> Scope:
    return {"type": "http", "method": "POST", "path": "/", "headers": headers}


async def answered(app, scope: Scope, messages: list[Message]) -> list[tuple[bytes, bytes]]:
    queue = list(messages)
    started: list[Message] = []

    async def receive() -> Message:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            started.append(message)

    await ClosesOnUnreadBody(app)(scope, receive, send)
    (start,) = started
    return [(name.lower(), value) for name, value in start["headers"]]


def answering(reads: int, headers: list[tuple[bytes, bytes]] | None = None):
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        for _ in range(reads):
            await receive()
        await send({"type": "http.response.start", "status": 408, "headers": headers or []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


BODY = [(b"content-length", b"10")]
PIECES = [{"type": "http.request", "body": b"12345", "more_body": True},
          {"type": "http.request", "body": b"67890", "more_body": False}]


@pytest.mark.parametrize("reads", [0, 1])
async def test_an_answer_before_the_body_is_whole_closes(reads):
    headers = await answered(answering(reads), request(BODY), PIECES)
    assert (b"connection", b"close") in headers


async def test_an_answer_after_the_whole_body_keeps_the_connection():
    headers = await answered(answering(2), request(BODY), PIECES)
    assert not any(name == b"connection" for name, _ in headers)


async def test_a_request_without_a_body_keeps_the_connection():
    headers = await answered(answering(0), request([]), [])
    assert not any(name == b"connection" for name, _ in headers)


async def test_a_chunked_body_is_due_until_its_last_piece():
    headers = await answered(answering(1), request([(b"transfer-encoding", b"chunked")]), PIECES)
    assert (b"connection", b"close") in headers


async def test_an_answer_naming_its_connection_is_left_as_it_is():
    own = [(b"Connection", b"close")]
    headers = await answered(answering(0, own), request(BODY), PIECES)
    assert headers == [(b"connection", b"close")]
