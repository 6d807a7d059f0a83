"""The JWKS cache on its own: what a provider's key set may and may not contribute, that a
broken provider neither breaks known keys nor gets hammered, and that a slow one (a real
loopback HTTP server that drips its answer) never holds a login longer than one deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from vera.gateway.jwks import MAX_JWKS_BYTES, JwksCache


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def rsa_jwk(key: rsa.RSAPrivateKey, kid: str, **extra: Any) -> dict[str, Any]:
    return {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, **extra}


class Provider:
    """An httpx transport standing in for the IdP; ``answer`` is what the next GET returns."""

    def __init__(self, answer: httpx.Response) -> None:
        self.answer = answer
        self.fetches = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.fetches += 1
        return self.answer


def cache(provider: Provider, clock: Clock, *, min_refresh: float = 30.0) -> JwksCache:
    return JwksCache(
        "https://idp.test/jwks",
        cache_seconds=300,
        min_refresh_seconds=min_refresh,
        clock=clock,
        transport=httpx.MockTransport(provider),
    )


async def test_symmetric_and_encryption_keys_never_verify(rsa_key):
    keys = [
        {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", "alg": "HS256"},
        rsa_jwk(rsa_key, "enc", use="enc"),
        rsa_jwk(rsa_key, "sig", use="sig", alg="RS256"),
    ]
    provider = Provider(httpx.Response(200, json={"keys": keys}))
    jwks = cache(provider, Clock(), min_refresh=0)
    assert await jwks.key("hmac", "HS256") is None
    assert await jwks.key("enc", "RS256") is None
    assert await jwks.key("sig", "RS256") is not None


async def test_a_key_only_verifies_its_own_algorithm_family(rsa_key):
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_jwk = {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())), "kid": "e"}
    keys = [rsa_jwk(rsa_key, "r", alg="RS256"), rsa_jwk(rsa_key, "any"), ec_jwk]
    jwks = cache(Provider(httpx.Response(200, json={"keys": keys})), Clock())
    assert await jwks.key("r", "RS256") is not None
    assert await jwks.key("r", "RS512") is None  # the key pins RS256
    assert await jwks.key("r", "HS256") is None
    assert await jwks.key("any", "PS256") is not None  # RSA family, no alg pinned
    assert await jwks.key("any", "ES256") is None
    assert await jwks.key("e", "ES256") is not None
    assert await jwks.key("e", "RS256") is None


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(500),
        httpx.Response(200, content=b"not json"),
        httpx.Response(200, json={"no": "keys"}),
        httpx.Response(200, content=b"{" + b" " * MAX_JWKS_BYTES + b"}"),
        httpx.Response(302, headers={"location": "https://evil.test/jwks"}),
    ],
)
async def test_a_broken_provider_keeps_known_keys_and_is_not_hammered(rsa_key, answer):
    clock = Clock()
    provider = Provider(httpx.Response(200, json={"keys": [rsa_jwk(rsa_key, "k1")]}))
    jwks = cache(provider, clock)
    assert await jwks.key("k1", "RS256") is not None
    provider.answer = answer
    clock.now += 301  # the cache is stale: one refetch, which fails
    assert await jwks.key("k1", "RS256") is not None
    for _ in range(20):
        assert await jwks.key("rotated", "RS256") is None
    assert provider.fetches == 2


# A real provider on loopback ------------------------------------------------------------

DRIP_INTERVAL = 0.05  # far below any per-read timeout: only a total deadline stops it
FETCH_SECONDS = 0.5
# How long a test waits for a state it expects: generous, so a loaded machine cannot fail
# it; no test bounds how fast the cache is.
WAIT_SECONDS = 30.0


@dataclass
class SlowProvider:
    """A loopback HTTP server whose ``mode`` decides how the next GET is answered:
    ``serve`` (the JWKS), ``drip_headers`` (the status line one byte at a time),
    ``drip_body`` (headers, then the body one byte at a time), ``endless`` (a body that
    never ends, sent as fast as the client reads) or ``hold`` (the JWKS, once ``release``
    is set)."""

    jwks: dict[str, Any]
    mode: str = "serve"
    url: str = ""
    fetches: int = 0
    handlers: set[asyncio.Task[None]] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.fetches += 1
            body = json.dumps(self.jwks).encode()
            head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            if self.mode in ("serve", "hold"):
                if self.mode == "hold":
                    await self.release.wait()
                writer.write(head + b"content-length: %d\r\n\r\n" % len(body) + body)
            elif self.mode == "drip_headers":
                for byte in head:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(DRIP_INTERVAL)
            elif self.mode == "drip_body":
                writer.write(head + b"content-length: %d\r\n\r\n" % len(body))
                for byte in body:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(DRIP_INTERVAL)
            else:
                writer.write(head + b"transfer-encoding: chunked\r\n\r\n")
                chunk = b" " * 4096
                while True:
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def slow_provider(rsa_key) -> AsyncIterator[SlowProvider]:
    provider = SlowProvider({"keys": [rsa_jwk(rsa_key, "k1", alg="RS256")]})
    server = await asyncio.start_server(provider.handle, "127.0.0.1", 0)
    provider.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/jwks"
    try:
        yield provider
    finally:
        server.close()
        for task in provider.handlers:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*provider.handlers, return_exceptions=True)
        await server.wait_closed()


def real_cache(
    provider: SlowProvider,
    clock: Clock,
    *,
    min_refresh: float = 0.0,
    fetch_seconds: float = FETCH_SECONDS,
) -> JwksCache:
    return JwksCache(
        provider.url,
        cache_seconds=300,
        min_refresh_seconds=min_refresh,
        fetch_seconds=fetch_seconds,
        clock=clock,
    )


async def wait_until(condition, seconds: float = WAIT_SECONDS) -> None:
    async with asyncio.timeout(seconds):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("mode", ["drip_headers", "drip_body", "endless"])
async def test_a_cold_cache_waits_one_deadline_at_most(slow_provider, mode):
    slow_provider.mode = mode
    jwks = real_cache(slow_provider, Clock())
    # Given up at its deadline: a fetch that waited the drip out would find the key, and
    # one without a total deadline would never end the endless body (a generous limit
    # fails it here instead of hanging).
    async with asyncio.timeout(WAIT_SECONDS):
        assert await jwks.key("k1", "RS256") is None
    # The provider recovers: the next miss fetches again and the key verifies.
    slow_provider.mode = "serve"
    assert await jwks.key("k1", "RS256") is not None
    assert slow_provider.fetches == 2


async def test_known_keys_verify_at_once_while_a_slow_refresh_runs(slow_provider):
    clock = Clock()
    # A refresh deadline far past the wait below: a login that waited on the refresh
    # would fail the wait instead of returning.
    jwks = real_cache(slow_provider, clock, min_refresh=30, fetch_seconds=10 * WAIT_SECONDS)
    assert await jwks.key("k1", "RS256") is not None
    slow_provider.mode = "hold"
    clock.now += 301  # stale: the next login starts a refresh the provider holds
    async with asyncio.timeout(WAIT_SECONDS):
        keys = await asyncio.gather(*(jwks.key("k1", "RS256") for _ in range(20)))
    assert all(key is not None for key in keys)  # answered while the provider holds
    await wait_until(lambda: slow_provider.fetches == 2)  # one refresh for twenty logins
    assert not slow_provider.release.is_set()
    slow_provider.release.set()
    await wait_until(lambda: all(task.done() for task in slow_provider.handlers))
    assert slow_provider.fetches == 2
    assert await jwks.key("k1", "RS256") is not None  # and the known key still verifies


async def test_an_unknown_kid_shares_the_refresh_in_flight(slow_provider, rsa_key):
    clock = Clock()
    jwks = real_cache(slow_provider, clock, min_refresh=0)
    assert await jwks.key("k1", "RS256") is not None
    slow_provider.jwks["keys"].append(rsa_jwk(rsa_key, "k2", alg="RS256"))
    found = await asyncio.gather(*(jwks.key("k2", "RS256") for _ in range(10)))
    assert all(key is not None for key in found)
    assert slow_provider.fetches == 2
