"""The external identity provider's signing keys, fetched from its JWKS URL.

Keys are cached for ``oauth_jwks_cache_seconds``; an unknown ``kid`` (key rotation) may
refetch early, but never more than once per ``oauth_jwks_min_refresh_seconds`` whatever
the number of tokens naming unknown keys, and concurrent misses share one fetch. A failed
fetch keeps the keys already known. Symmetric (``oct``) keys and keys not meant for
signatures are ignored, so a JWKS can never turn an HMAC secret into a verification key.

A slow provider never stalls logins that known keys can verify: a stale cache is
refreshed in the background while its keys keep verifying, and only a token whose key is
not known yet (a cold cache, a rotation) waits for the fetch. The whole fetch ends within
one deadline and reads at most ``MAX_JWKS_BYTES``, so even a provider that drips one byte
at a time costs a waiting login ``oauth_jwks_fetch_seconds`` at most.
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
DEFAULT_FETCH_SECONDS = 5.0
# A key's kty decides which algorithm families it may verify (no HS/RS confusion).
KEY_FAMILIES = {"RSA": ("RS", "PS"), "EC": ("ES",), "OKP": ("EdDSA",)}

Keys = dict[str, tuple[Any, str, str | None]]  # kid -> (key, kty, alg)


def key_fits(kty: str, algorithm: str) -> bool:
    return any(algorithm.startswith(prefix) for prefix in KEY_FAMILIES.get(kty, ()))


class JwksCache:
    def __init__(
        self,
        url: str,
        *,
        cache_seconds: float,
        min_refresh_seconds: float,
        fetch_seconds: float = DEFAULT_FETCH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url
        self._cache_seconds = cache_seconds
        self._min_refresh = min_refresh_seconds
        self._fetch_seconds = fetch_seconds
        self._clock = clock
        self._transport = transport
        self._keys: Keys = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._refresh: asyncio.Task[None] | None = None  # the one fetch in flight
        self.fetches = 0  # how many times the URL was requested (observability, tests)

    async def key(self, kid: str, algorithm: str) -> Any | None:
        """The public key for ``kid`` usable with ``algorithm``, or None."""
        entry = self._keys.get(kid)
        if entry is None:
            refresh = self._start_refresh()
            if refresh is not None:
                # shield: one caller giving up (its request cancelled) never cancels the
                # fetch the others share; the fetch bounds itself.
                await asyncio.shield(refresh)
            entry = self._keys.get(kid)
            if entry is None:
                return None
        elif self._fetched_at is None or self._clock() - self._fetched_at >= self._cache_seconds:
            self._start_refresh()  # in the background: this login keeps the cached key
        key, kty, alg = entry
        if not key_fits(kty, algorithm) or (alg is not None and alg != algorithm):
            return None
        return key

    def _start_refresh(self) -> asyncio.Task[None] | None:
        """The fetch in flight, a new one, or None inside the minimum refresh interval."""
        if self._refresh is not None and not self._refresh.done():
            return self._refresh
        now = self._clock()
        if self._attempted_at is not None and now - self._attempted_at < self._min_refresh:
            # Someone fetched (or tried) a moment ago: unknown kids wait for the interval.
            return None
        self._attempted_at = now
        self.fetches += 1
        self._refresh = asyncio.create_task(self._refresh_keys(now))
        return self._refresh

    async def _refresh_keys(self, started: float) -> None:
        try:
            async with asyncio.timeout(self._fetch_seconds):
                keys = await self._fetch()
        except (httpx.HTTPError, ValueError, RecursionError, TimeoutError) as exc:
            log.warning(
                "JWKS fetch failed (%s); keeping %d known keys",
                type(exc).__name__,
                len(self._keys),
            )
            return
        self._keys = keys
        self._fetched_at = started

    async def _fetch(self) -> Keys:
        async with httpx.AsyncClient(
            timeout=self._fetch_seconds, transport=self._transport, follow_redirects=False
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
        keys: Keys = {}
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
