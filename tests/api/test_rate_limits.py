"""Rate limits on the REST API (vera.api.rate_limits), through the real app and the real
identity service: per client address, per credential, and registration per address and
in total; each refusal is 429 ``quota_exceeded`` naming its bucket, with Retry-After."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from vera.api.app import build_app
from vera.config import Settings

API_BASE = "http://127.0.0.1:8081"
SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # the start of a window of every length used here

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_app(identity_address: str, clock: Clock):
    @contextlib.asynccontextmanager
    async def factory(**api: object) -> AsyncIterator[Clients]:
        settings = Settings(environment="dev", mcp={"jwt_secret": SECRET},
                            api={"open_registration": True, **api},
                            services={"identity": identity_address})
        app = build_app(settings, clock=clock)
        async with app.router.lifespan_context(app), contextlib.AsyncExitStack() as stack:

            async def client(address: str) -> httpx.AsyncClient:
                transport = httpx.ASGITransport(app=app, client=(address, 40000))
                return await stack.enter_async_context(
                    httpx.AsyncClient(transport=transport, base_url=API_BASE))

            yield Clients(client)

    return factory


class Clients:
    def __init__(self, open_client) -> None:
        self._open = open_client
        self._clients: dict[str, httpx.AsyncClient] = {}

    async def at(self, address: str) -> httpx.AsyncClient:
        if address not in self._clients:
            self._clients[address] = await self._open(address)
        return self._clients[address]


def _refused(response: httpx.Response, bucket: str) -> None:
    assert response.status_code == 429
    error = response.json()["error"]
    assert (error["code"], error["bucket"]) == ("quota_exceeded", bucket)
    assert int(response.headers["retry-after"]) == int(error["retry_after_seconds"]) > 0


async def test_an_address_over_its_rate_is_refused_and_no_other(
    make_app, new_admin_key, clock
) -> None:
    key = {"authorization": f"Bearer {await new_admin_key()}"}
    async with make_app(requests_per_minute_per_address=3) as apps:
        flooder, other = await apps.at("203.0.113.7"), await apps.at("198.51.100.2")
        for _ in range(3):
            assert (await flooder.get("/identity/me", headers=key)).status_code == 200
        _refused(await flooder.get("/identity/me", headers=key), "address")
        _refused(await flooder.get("/identity/me"), "address")  # refused before the key
        assert (await flooder.get("/livez")).status_code == 200  # probes are not charged
        assert (await other.get("/identity/me", headers=key)).status_code == 200
        clock.now += 60
        assert (await flooder.get("/identity/me", headers=key)).status_code == 200


async def test_readiness_is_charged_to_its_address(make_app) -> None:
    """Readiness calls every service: a flood of it is refused like any other request."""
    async with make_app(requests_per_minute_per_address=2) as apps:
        flooder, kubelet = await apps.at("203.0.113.7"), await apps.at("10.0.0.1")
        for _ in range(2):
            assert (await flooder.get("/readyz")).status_code in (200, 503)
        _refused(await flooder.get("/readyz"), "address")
        assert (await kubelet.get("/readyz")).status_code in (200, 503)
        assert (await flooder.get("/livez")).status_code == 200


async def test_a_key_over_its_rate_is_refused_from_every_address(
    make_app, new_admin_key
) -> None:
    key = {"authorization": f"Bearer {await new_admin_key()}"}
    async with make_app(requests_per_minute_per_key=2) as apps:
        first, second = await apps.at("203.0.113.7"), await apps.at("198.51.100.2")
        account = await second.post("/identity/register", json={"display_name": "dev"})
        other_key = {"authorization": f"Bearer {account.json()['api_key']}"}
        assert (await first.get("/identity/me", headers=key)).status_code == 200
        assert (await second.get("/identity/me", headers=key)).status_code == 200
        _refused(await second.get("/identity/me", headers=key), "key")
        _refused(await first.get("/identity/me", headers=key), "key")
        assert (await first.get("/identity/me", headers=other_key)).status_code == 200


async def test_registration_is_bounded_per_address_and_in_total(
    make_app, identity_rows, clock
) -> None:
    async def register(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post("/identity/register", json={"display_name": "dev"})

    async with make_app(registrations_per_hour_per_address=2, registrations_per_day=3) as apps:
        one, two, three = [await apps.at(f"203.0.113.{n}") for n in (1, 2, 3)]
        for _ in range(2):
            assert (await register(one)).status_code == 201
        rows = await identity_rows()
        _refused(await register(one), "registration")
        assert await identity_rows() == rows  # no account made
        assert (await register(two)).status_code == 201
        _refused(await register(three), "registration_total")
        clock.now += 3600  # a new hour, not a new day: the total still holds
        _refused(await register(one), "registration_total")
        clock.now += 86400
        assert (await register(three)).status_code == 201
