"""Rate limits on the REST API, counted per process in fixed windows (``vera.quota``).

Every request but liveness is charged to its client address and, when it presents a
credential, to that credential (a hash of its Authorization header, verified or not, so a
flood of bad keys still spends its address's budget). Registration is also charged to its
address and to a total for the process, so open registration cannot mint unbounded
accounts, each with quotas of its own. Over any: 429 ``quota_exceeded`` naming the
bucket, with ``Retry-After``, the code the gateway answers.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from vera.api.errors import error_response, tally_refusal
from vera.config import ApiSettings
from vera.errors import QuotaExceeded
from vera.quota import BucketLimit, InMemoryQuotaStore, QuotaPolicy, Refusal
from vera.rpc.refusals import RefusalTally

ADDRESS_BUCKET = "address"
KEY_BUCKET = "key"
REGISTRATION_BUCKET = "registration"
REGISTRATION_TOTAL_BUCKET = "registration_total"
_EVERYONE = "all callers"
# Liveness reads nothing and calls nothing; readiness calls every service, so it is charged.
UNCHARGED_PATHS = frozenset({"/livez"})


def api_quota(api: ApiSettings, clock: Callable[[], float] = time.time) -> QuotaPolicy:
    limits = {
        ADDRESS_BUCKET: BucketLimit(api.requests_per_minute_per_address, 60),
        KEY_BUCKET: BucketLimit(api.requests_per_minute_per_key, 60),
        REGISTRATION_BUCKET: BucketLimit(api.registrations_per_hour_per_address, 3600),
        REGISTRATION_TOTAL_BUCKET: BucketLimit(api.registrations_per_day, 86400),
    }
    return QuotaPolicy(limits, InMemoryQuotaStore(clock), clock=clock)


def refused(refusal: Refusal) -> QuotaExceeded:
    return QuotaExceeded("too many requests", bucket=refusal.bucket,
                         retry_after_seconds=refusal.retry_after_seconds)


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


async def charge_registration(request: Request) -> None:
    """Raises QuotaExceeded when this address, or the process, registered enough."""
    quota: QuotaPolicy = request.app.state.rate_limits
    refusal = await quota.charge(_address(request.scope), REGISTRATION_BUCKET)
    if refusal is None:
        refusal = await quota.charge(_EVERYONE, REGISTRATION_TOTAL_BUCKET)
    if refusal is not None:
        raise refused(refusal)


class RateLimit:
    """ASGI middleware: charges each request before anything else reads it."""

    def __init__(self, app: ASGIApp, quota: QuotaPolicy, refusals: RefusalTally) -> None:
        self._app = app
        self._quota = quota
        self._refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNCHARGED_PATHS:
            await self._app(scope, receive, send)
            return
        refusal = await self._quota.charge(_address(scope), ADDRESS_BUCKET)
        credential = Headers(scope=scope).get("authorization")
        if refusal is None and credential:
            digest = hashlib.sha256(credential.encode("utf-8", "replace")).hexdigest()
            refusal = await self._quota.charge(digest, KEY_BUCKET)
        if refusal is not None:
            error = refused(refusal)
            tally_refusal(self._refusals, error)
            await error_response(error)(scope, receive, send)
            return
        await self._app(scope, receive, send)
