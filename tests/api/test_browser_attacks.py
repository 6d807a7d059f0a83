"""A web page the developer visits must not drive the REST API.

The page is simulated by the headers a browser sends for it: a cross-site form or
``text/plain`` fetch (``Origin: http://evil.example``), a page on another local port, an
opaque origin, and DNS rebinding (the page's own name now resolves to 127.0.0.1, so the
request carries ``Host: attacker.example``). Each attack targets a route with a side effect
and is run in both profiles; each is refused before authentication, and nothing changes in
identity's database (in local-dev not even the local principal is created).
"""

from __future__ import annotations

import pytest

from vera.api.auth import LocalDevRestAuthenticator
from vera.config import DEFAULT_LOCAL_PRINCIPAL_ID

PROFILES = ["local-dev", "remote-authenticated"]

OWN_ORIGIN = "http://127.0.0.1:8081"  # the listener's own origin (tests/api/conftest.py dials it)
JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain;charset=UTF-8"}  # what a no-CORS fetch or form sends

# Routes whose side effect a page would want: (method, path, JSON body).
TARGETS = [
    ("POST", "/identity/users", b'{"display_name": "eve", "admin": true}'),
    ("POST", "/identity/api-keys", b'{"label": "pwned"}'),
    ("POST", "/identity/mcp-token", b'{"scopes": ["memory:read"]}'),
    ("POST", "/identity/workspaces", b'{"slug": "pwned"}'),
    ("DELETE", f"/identity/users/{DEFAULT_LOCAL_PRINCIPAL_ID}/personal-knowledge", b"{}"),
    ("POST", "/curation/projects/payments/sources/src-1/retract", b'{"reason": "x"}'),
    ("POST", "/curation/projects/payments/proposals/fk-1/verify", b"{}"),
]

# (attack, headers, HTTP status, the header the refusal names)
ATTACKS = [
    ("cross-site text/plain", {"origin": "http://evil.example", **TEXT}, 403, "origin"),
    ("cross-site json", {"origin": "http://evil.example", **JSON}, 403, "origin"),
    ("another local port", {"origin": "http://localhost:3000", **JSON}, 403, "origin"),
    ("another loopback port", {"origin": "http://127.0.0.1:3000", **JSON}, 403, "origin"),
    ("opaque origin", {"origin": "null", **TEXT}, 403, "origin"),
    ("dns rebinding", {"host": "attacker.example:8081",
                       "origin": "http://attacker.example:8081", **JSON}, 421, "host"),
    ("dns rebinding, no origin", {"host": "attacker.example:8081", **TEXT}, 421, "host"),
    ("text/plain without origin", TEXT, 415, "content-type"),
    ("form without origin", {"content-type": "application/x-www-form-urlencoded"}, 415,
     "content-type"),
    ("body without a content type", {}, 415, "content-type"),
]


@pytest.mark.parametrize(("attack", "headers", "status", "header"), ATTACKS,
                         ids=[a[0] for a in ATTACKS])
async def test_a_foreign_page_cannot_drive_the_api(rest, identity_rows, attack: str,
                                                   headers: dict[str, str], status: int,
                                                   header: str) -> None:
    before = await identity_rows()
    for method, path, body in TARGETS:
        response = await rest.client.request(
            method, path, content=body, headers={**rest.credentials, **headers})
        assert response.status_code == status, (method, path)
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_input", header), (method, path)
        assert "access_token" not in response.text and "api_key" not in response.text
    assert rest.authenticator.calls == 0
    after = await identity_rows()
    assert after == before
    if isinstance(rest.authenticator.inner, LocalDevRestAuthenticator):
        # local-dev: the local principal was never even created
        assert after["principals"] == 0


async def test_reads_are_refused_on_a_rebound_name_too(rest) -> None:
    for path in ("/identity/me", "/identity/api-keys", "/curation/projects/p/proposals"):
        response = await rest.client.get(
            path, headers={**rest.credentials, "host": "attacker.example:8081"})
        assert response.status_code == 421
        assert response.json()["error"]["field"] == "host"
        assert response.json()["error"]["setting"] == "VERA_API__ALLOWED_HOSTS"
    assert rest.authenticator.calls == 0


async def test_the_same_request_from_the_developers_own_client_goes_through(
        rest, identity_rows) -> None:
    """The control: without the foreign page's headers the attack's request would work."""
    before = await identity_rows()
    for extra in ({}, {"origin": OWN_ORIGIN}):  # no Origin, or this listener's own origin
        response = await rest.client.post(
            "/identity/api-keys", content=b'{"label": "mine"}',
            headers={**rest.credentials, **JSON, **extra})
        assert response.status_code == 201
    charset = await rest.client.post(
        "/identity/api-keys", content=b'{"label": "mine"}',
        headers={**rest.credentials, "content-type": "application/json; charset=utf-8"})
    assert charset.status_code == 201
    assert (await identity_rows())["api_keys"] == before["api_keys"] + 3


@pytest.mark.parametrize("profile", PROFILES)
async def test_configured_hosts_and_origins_are_matched_exactly(profile: str, make_rest) -> None:
    async with make_rest(profile, allowed_hosts=["vera.example"],
                         allowed_origins=["https://console.example"]) as api:
        credentials = api.credentials
        ok = await api.client.get("/identity/me", headers={
            **credentials, "host": "vera.example", "origin": "https://console.example"})
        assert ok.status_code == 200
        for headers, status in (
            ({"host": "vera.example", "origin": "https://console.example:8443"}, 403),
            ({"host": "vera.example", "origin": "http://console.example"}, 403),
            ({"host": "vera.example", "origin": OWN_ORIGIN}, 403),  # the default is replaced
            ({"host": "vera.example:8081"}, 421),
            ({}, 421),  # 127.0.0.1 is no longer listed
        ):
            response = await api.client.get("/identity/me", headers={**credentials, **headers})
            assert response.status_code == status, headers


async def test_probes_skip_the_host_check(rest) -> None:
    # Probes dial the pod address; liveness carries no data and has no side effect.
    response = await rest.client.get("/livez", headers={"host": "10.0.0.7:8081"})
    assert response.status_code == 200
