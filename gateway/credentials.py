"""Whether the credential behind a built-in MCP token still stands.

A built-in token names the API key it was minted from (``vera_key_id``). Before the
gateway serves one, identity says whether that key is still the principal's and unrevoked
(``CheckCredential``, under the RPC deadline); the verdict is reused for
``VERA_MCP__REVOCATION_CACHE_SECONDS``, so a revoked key stops its tokens within that long
while a busy agent costs identity one call per key per window, not one per request.

local-dev's tokens name the data dir's secret (``mcp_tokens.LOCAL_KEY_ID``), which nothing
revokes but the secret itself: they act as the local principal, with no lookup.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from vera.config import Settings
from vera.identity.v1 import identity_pb2
from vera.local_principal import LocalPrincipal
from vera.mcp_tokens import LOCAL_KEY_ID
from vera.rpc.backends import Backends

KEY_REVOKED = "key_revoked"
PRINCIPAL_DISABLED = "principal_disabled"
# Verdicts kept at most; the oldest goes first (a flood of keys cannot grow memory).
MAX_VERDICTS = 10_000

_REFUSALS = {
    identity_pb2.CREDENTIAL_STATE_KEY_REVOKED: KEY_REVOKED,
    identity_pb2.CREDENTIAL_STATE_PRINCIPAL_DISABLED: PRINCIPAL_DISABLED,
}


class CredentialRefused(Exception):
    """The token's key is revoked or its principal disabled; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Verdict:
    checked_at: float
    principal_id: str
    refusal: str | None


class CredentialCheck:
    def __init__(
        self,
        settings: Settings,
        *,
        deadline_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = settings.mcp.revocation_cache_seconds
        self._deadline = deadline_seconds
        self._clock = clock
        self._local = LocalPrincipal(settings) if settings.auth_profile == "local-dev" else None
        self._verdicts: dict[tuple[str, str], _Verdict] = {}

    async def principal(self, principal_id: str, key_id: str, backends: Backends) -> str:
        """The principal the token acts as, once its key is known to stand; raises
        ``CredentialRefused``. An unknown principal is identity's INVALID_INPUT."""
        if self._local is not None and key_id == LOCAL_KEY_ID:
            if principal_id != self._local.principal_id:
                raise CredentialRefused(KEY_REVOKED)
            return await self._local.ensure(backends, timeout=self._deadline)
        verdict = self._fresh(principal_id, key_id)
        if verdict is None:
            reply = await backends.identity.CheckCredential(
                identity_pb2.CheckCredentialRequest(principal_id=principal_id, key_id=key_id),
                timeout=self._deadline,
            )
            verdict = _Verdict(
                self._clock(), reply.principal.principal_id, _REFUSALS.get(reply.state)
            )
            if reply.state != identity_pb2.CREDENTIAL_STATE_ACTIVE and verdict.refusal is None:
                verdict = _Verdict(verdict.checked_at, "", KEY_REVOKED)
            self._remember((principal_id, key_id), verdict)
        if verdict.refusal is not None:
            raise CredentialRefused(verdict.refusal)
        return verdict.principal_id

    def _fresh(self, principal_id: str, key_id: str) -> _Verdict | None:
        verdict = self._verdicts.get((principal_id, key_id))
        if verdict is None or self._clock() - verdict.checked_at >= self._ttl:
            return None
        return verdict

    def _remember(self, key: tuple[str, str], verdict: _Verdict) -> None:
        self._verdicts.pop(key, None)
        while len(self._verdicts) >= MAX_VERDICTS:
            self._verdicts.pop(next(iter(self._verdicts)))
        self._verdicts[key] = verdict
