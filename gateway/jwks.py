"""The external identity provider's signing keys, fetched from its JWKS URL.

Keys are cached for ``oauth_jwks_cache_seconds``; an unknown ``kid`` (key rotation) may
refetch early, but never more than once per ``oauth_jwks_min_refresh_seconds`` whatever
the number of tokens naming unknown keys, and concurrent misses share one fetch. A failed
fetch keeps the keys already known. Symmetric (``oct``) keys and keys not meant for
signatures are ignored, so a JWKS can never turn an HMAC secret into a verification key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

log = logging.getLogger(__name__)

MAX_JWKS_BYTES = 64 * 1024
MAX_KEYS = 32
FETCH_TIMEOUT_SECONDS = 5.0
# A key's kty decides which algorithm families it may verify (no HS/RS confusion).
KEY_FAMILIES = {"RSA": ("RS", "PS"), "EC": ("ES",), "OKP": ("EdDSA",)}


def key_fits(kty: str, algorithm: str) -> bool:
    return any(algorithm.startswith(prefix) for prefix in KEY_FAMILIES.get(kty, ()))


class JwksCache:
    def __init__(
        self,
        url: str,
        *,
        cache_seconds: float,
        min_refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url
        self._cache_seconds = cache_seconds
        self._min_refresh = min_refresh_seconds
        self._clock = clock
        self._transport = transport
        self._keys: dict[str, tuple[Any, str, str | None]] = {}  # kid -> (key, kty, alg)
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0  # how many times the URL was requested (observability, tests)

    async def key(self, kid: str, algorithm: str) -> Any | None:
        """The public key for ``kid`` usable with ``algorithm``, or None."""
        now = self._clock()
        stale = self._fetched_at is None or now - self._fetched_at >= self._cache_seconds
        if stale or kid not in self._keys:
            await self._refresh()
        entry = self._keys.get(kid)
        if entry is None:
            return None
        key, kty, alg = entry
        if not key_fits(kty, algorithm) or (alg is not None and alg != algorithm):
            return None
        return key

    async def _refresh(self) -> None:
        async with self._lock:
            now = self._clock()
            if self._attempted_at is not None and now - self._attempted_at < self._min_refresh:
                # Someone fetched (or tried) a moment ago: unknown kids wait for the interval.
                return
            self._attempted_at = now
            self.fetches += 1
            try:
                keys = await self._fetch()
            except (httpx.HTTPError, ValueError) as exc:
                log.warning(
                    "JWKS fetch failed (%s); keeping %d known keys",
                    type(exc).__name__,
                    len(self._keys),
                )
                return
            self._keys = keys
            self._fetched_at = now

    async def _fetch(self) -> dict[str, tuple[Any, str, str | None]]:
        async with httpx.AsyncClient(
            timeout=FETCH_TIMEOUT_SECONDS, transport=self._transport, follow_redirects=False
        ) as http:
            async with http.stream("GET", self._url, headers={"accept": "application/json"}) as r:
                r.raise_for_status()
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise ValueError("JWKS document too large")
        document = json.loads(bytes(body))
        entries = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise ValueError("JWKS document has no keys")
        keys: dict[str, tuple[Any, str, str | None]] = {}
        for entry in entries[:MAX_KEYS]:
            if not isinstance(entry, dict):
                continue
            kid, kty, alg = entry.get("kid"), entry.get("kty"), entry.get("alg")
            if not isinstance(kid, str) or kty not in KEY_FAMILIES:
                continue  # oct (symmetric) and unknown key types never verify anything
            if entry.get("use", "sig") != "sig":
                continue
            try:
                parsed = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                continue
            keys[kid] = (parsed.key, kty, alg if isinstance(alg, str) else None)
        return keys
