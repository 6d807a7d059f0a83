"""A body larger than the general limit (an ingest batch, up to 2 MiB) is read only for a
caller its headers prove may send it, and only a few at once: a 2 MiB upload without a
credential, or from someone who curates nothing, is answered before a byte of it is
pulled, and one more large body than the process holds is refused unread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from vera.api.requests import INGEST_MAX_BODY_BYTES, LARGE_BODIES_BUCKET
from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.client import open_channel

JSON = {"content-type": "application/json"}
CHUNK = 64 * 1024
INGEST = "/curation/projects/payments/ingest"


class Upload:
    """A body of ``size`` bytes, declared in Content-Length, streamed in chunks; counts
    what the server pulled. ``hold``: after the first chunk, wait until it is set."""

    def __init__(self, size: int = INGEST_MAX_BODY_BYTES, hold: asyncio.Event | None = None
                 ) -> None:
        self.size = size
        self.sent = 0
        self.hold = hold
        self.started = asyncio.Event()

    @property
    def headers(self) -> dict[str, str]:
        return {**JSON, "content-length": str(self.size)}

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < self.size:
            chunk = b" " * min(CHUNK, self.size - self.sent)
            self.sent += len(chunk)
            yield chunk
            self.started.set()
            if self.hold is not None:
                await self.hold.wait()


def error_of(response: httpx.Response) -> dict[str, object]:
    return response.json()["error"]


async def test_a_2_mib_ingest_without_a_credential_is_refused_before_its_body_is_sent(
        rest) -> None:
    for credentials in ({}, {"authorization": "Bearer vera_not-a-key"},
                        {"authorization": "Bearer not-the-secret-0123456789abcdef0123"}):
        upload = Upload()
        response = await rest.client.post(INGEST, content=upload,
                                          headers={**upload.headers, **credentials})
        assert response.status_code == 401
        assert error_of(response)["code"] == "unauthenticated"
        assert "www-authenticate" in response.headers
        assert upload.sent == 0


async def test_an_ingest_from_someone_who_curates_nothing_is_refused_before_its_body(
        make_rest, identity_address: str) -> None:
    channel = open_channel(identity_address, deadline_seconds=10)
    try:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        user = await stub.CreateUser(pb.CreateUserRequest(display_name="mallory"))
        key = (await stub.CreateApiKey(
            pb.CreateApiKeyRequest(principal_id=user.principal.principal_id))).api_key
    finally:
        await channel.close()
    async with make_rest("remote-authenticated") as api:
        upload = Upload()
        response = await api.client.post(
            INGEST, content=upload, headers={**upload.headers, "authorization": f"Bearer {key}"})
    assert response.status_code in (403, 404)
    assert error_of(response)["code"] == "project_out_of_scope"
    assert upload.sent == 0


async def test_large_bodies_in_flight_are_bounded(make_rest) -> None:
    for profile in ("local-dev", "remote-authenticated"):
        ingest = f"/curation/projects/{profile}/ingest"  # one database: a project each
        async with make_rest(profile, large_bodies_in_flight=1) as api:
            release = asyncio.Event()
            held = Upload(hold=release)
            first = asyncio.create_task(api.client.post(
                ingest, content=held, headers={**held.headers, **api.credentials}))
            await asyncio.wait_for(held.started.wait(), 30)

            refused = Upload()
            response = await api.client.post(
                ingest, content=refused, headers={**refused.headers, **api.credentials})
            assert response.status_code == 429
            assert (error_of(response)["code"], error_of(response)["bucket"]) == (
                "quota_exceeded", LARGE_BODIES_BUCKET)
            assert "retry-after" in response.headers
            assert refused.sent == 0
            # A small body is not held back by the large ones.
            small = await api.client.post("/identity/api-keys", json={"label": "small"},
                                          headers=api.credentials)
            assert small.status_code == 201

            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            # The slot is free again: the next large body is read (and found blank).
            after = Upload(size=CHUNK * 2)
            response = await api.client.post(
                ingest, content=after, headers={**after.headers, **api.credentials})
            assert response.status_code == 400
            assert (error_of(response)["code"], error_of(response)["field"]) == (
                "invalid_input", "body")  # read whole, and not JSON
            assert after.sent == after.size
