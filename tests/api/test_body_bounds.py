"""A REST body is bounded before anything reads it: an oversize declared Content-Length is
refused unread, a streamed body is cut off as soon as it passes the limit, and both happen
before authentication and before any identity call (registration included)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from vera.api.requests import MAX_BODY_BYTES

JSON = {"content-type": "application/json"}
CHUNK = 4096


def assert_too_large(response) -> None:
    assert response.status_code == 413
    error = response.json()["error"]
    assert (error["code"], error["field"], error["reason"]) == ("invalid_input", "body",
                                                                "too_large")


class Endless:
    """A chunked body far over the limit (1 MiB, so that a server reading it all still
    ends); counts what the server pulled from it."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(256):
            self.sent += CHUNK
            yield b" " * CHUNK


async def test_a_declared_oversize_body_is_refused_before_authentication(rest, identity_rows
                                                                         ) -> None:
    before = await identity_rows()
    body = b'{"display_name": "big"}'.ljust(MAX_BODY_BYTES + 1)
    for path in ("/identity/users", "/identity/api-keys", "/identity/register",
                 "/curation/projects/p/sources/s/retract"):
        response = await rest.client.post(path, content=body,
                                          headers={**rest.credentials, **JSON})
        assert_too_large(response)
    assert rest.authenticator.calls == 0
    assert await identity_rows() == before


async def test_a_streamed_body_is_cut_off_once_it_passes_the_limit(rest, identity_rows) -> None:
    before = await identity_rows()
    for path in ("/identity/users", "/identity/register"):
        endless = Endless()
        response = await rest.client.post(path, content=endless,
                                          headers={**rest.credentials, **JSON})
        assert_too_large(response)
        assert endless.sent <= MAX_BODY_BYTES + CHUNK
    assert rest.authenticator.calls == 0
    assert await identity_rows() == before


async def test_a_body_at_the_limit_is_read(rest) -> None:
    body = b'{"label": "edge"}'.ljust(MAX_BODY_BYTES)
    response = await rest.client.post("/identity/api-keys", content=body,
                                      headers={**rest.credentials, **JSON})
    assert response.status_code == 201
    assert response.json()["label"] == "edge"


async def test_open_registration_refuses_an_oversize_body_unread(make_rest, identity_rows
                                                                 ) -> None:
    async with make_rest("remote-authenticated", open_registration=True) as api:
        before = await identity_rows()
        for body in (b" " * (MAX_BODY_BYTES + 1), Endless()):
            response = await api.client.post("/identity/register", content=body, headers=JSON)
            assert_too_large(response)
        assert await identity_rows() == before


async def test_closed_registration_is_refused_before_the_body_is_parsed(make_rest) -> None:
    async with make_rest("remote-authenticated") as api:
        response = await api.client.post("/identity/register", content=b"not json",
                                         headers=JSON)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "unauthorized"
