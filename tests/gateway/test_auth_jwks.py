"""The JWKS cache on its own: what a provider's key set may and may not contribute, and
that a broken provider neither breaks known keys nor gets hammered."""

from __future__ import annotations

import json
from dataclasses import dataclass
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
