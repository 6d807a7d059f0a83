"""What the bearer boundary answers when resolving the caller fails with a service error:
only an outage is reported as one; the HTTP status and data.code never disagree."""

from __future__ import annotations

import httpx
import pytest
from mcp.server.transport_security import TransportSecuritySettings

from vera.errors import Unauthorized, Unavailable, VeraError
from vera.gateway.resource import BearerAuthMiddleware
from vera.rpc.refusals import RefusalTally


class FailingAuthenticator:
    def __init__(self, error: VeraError) -> None:
        self.error = error

    async def resolve(self, authorization, backends):
        raise self.error


async def never_reached(scope, receive, send) -> None:
    raise AssertionError("the app ran without a caller")


@pytest.mark.parametrize(
    ("error", "data"),
    [
        (Unavailable("identity is down"), {"code": "internal_error", "reason": "unavailable"}),
        (Unauthorized("refused"), {"code": "internal_error"}),
        (VeraError("bug"), {"code": "internal_error"}),
    ],
)
async def test_a_failed_resolution_is_503_and_only_an_outage_says_unavailable(error, data):
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = BearerAuthMiddleware(never_reached, FailingAuthenticator(error), lambda: None, security,
                               RefusalTally("gateway"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t"
    ) as http:
        response = await http.post("/mcp", headers={"authorization": "Bearer x"}, json={})
    assert response.status_code == 503
    answered = response.json()["error"]["data"]
    assert answered.pop("request_id")  # the correlation id its log line carries
    assert answered == data
