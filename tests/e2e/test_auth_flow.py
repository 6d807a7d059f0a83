"""The documented authenticated flow against the real stack (`vera up` with built-in JWT):
register -> API key -> POST /identity/mcp-token -> MCP call with the bearer token."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

import httpx
import jwt
import pytest
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET
from harness import without_ids
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

pytestmark = pytest.mark.e2e

ALL_SCOPES = ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"]


def api_url(stack) -> str:
    return json.loads((stack.data_dir / "run" / "stack.json").read_text())["api_url"]


def mcp_client(stack, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


def post_mcp(stack, authorization: str | None) -> httpx.Response:
    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json"}
    if authorization:
        headers["authorization"] = authorization
    return httpx.post(stack.mcp_url, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "e2e", "version": "0"}}})


async def test_register_api_key_mcp_token_then_mcp_call(auth_stack) -> None:
    http = httpx.AsyncClient(base_url=api_url(auth_stack))
    async with http:
        await documented_flow(auth_stack, http)


async def documented_flow(auth_stack, http: httpx.AsyncClient) -> None:
    assert (await http.get("/livez")).status_code == 200
    assert (await http.get("/readyz")).status_code == 200

    registered = await http.post("/identity/register", json={"display_name": "dev"})
    assert registered.status_code == 201
    account = registered.json()
    api_key = account["api_key"]

    exchanged = await http.post("/identity/mcp-token",
                           headers={"authorization": f"Bearer {api_key}"},
                           json={"scopes": ALL_SCOPES})
    assert exchanged.status_code == 200
    answer = exchanged.json()
    token = answer["token"]
    assert answer["access_token"] == token
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == answer["expires_in"] == 86400
    assert datetime.fromisoformat(answer["expires_at"]).timestamp() == claims["exp"]
    assert claims["vera_key_id"] == account["key_id"]

    async with mcp_client(auth_stack, token) as client:
        result = await client.call_tool("knowledge_bootstrap", {})
        assert not result.is_error, result.content
        boot = result.structured_content
    assert boot["principal"]["principal_id"] == account["principal_id"]
    assert boot["auth_profile"] == "remote-authenticated"
    assert {c["class"] for c in boot["capabilities"] if c["granted"]} == {
        "READ", "PROPOSE", "FEEDBACK", "SNAPSHOT"}
    assert boot["repository"]["status"] == "personal_only"

    # A read-only token (no body) is granted READ only.
    read_only = (await http.post("/identity/mcp-token",
                                 headers={"authorization": f"Bearer {api_key}"})
                 ).json()["access_token"]
    async with mcp_client(auth_stack, read_only) as client:
        boot = (await client.call_tool("knowledge_bootstrap", {})).structured_content
    assert {c["class"] for c in boot["capabilities"] if c["granted"]} == {"READ"}


async def test_revoking_the_key_stops_its_mcp_token_within_seconds(auth_stack) -> None:
    async with httpx.AsyncClient(base_url=api_url(auth_stack)) as http:
        account = (await http.post("/identity/register", json={"display_name": "leaver"})).json()
        owner = {"authorization": f"Bearer {account['api_key']}"}
        second = await http.post("/identity/api-keys", headers=owner, json={"label": "laptop"})
        assert second.status_code == 201
        kept = (await http.post("/identity/mcp-token", headers=owner)).json()["token"]
        doomed = (await http.post(
            "/identity/mcp-token",
            headers={"authorization": f"Bearer {second.json()['api_key']}"})).json()["token"]
        for token in (kept, doomed):
            async with mcp_client(auth_stack, token) as client:
                assert not (await client.call_tool("knowledge_bootstrap", {})).is_error

        revoked = await http.delete(f"/identity/api-keys/{second.json()['key_id']}",
                                    headers=owner)
        assert revoked.json() == {"revoked": True}
        # Within VERA_MCP__REVOCATION_CACHE_SECONDS (5 s): polled, bounded well above it.
        give_up = time.monotonic() + 30
        while (refused := await apost_mcp(http, auth_stack, doomed)).status_code != 401:
            assert time.monotonic() < give_up, refused.status_code
            await asyncio.sleep(0.5)
    assert without_ids(refused.json()["error"]["data"]) == {
        "code": "unauthenticated", "reason": "key_revoked", "fix": "vera connect"}
    # The token of the key that stands goes on working.
    async with mcp_client(auth_stack, kept) as client:
        assert not (await client.call_tool("knowledge_bootstrap", {})).is_error


async def apost_mcp(http: httpx.AsyncClient, stack, token: str) -> httpx.Response:
    """``post_mcp``'s initialize with a bearer token, from async code."""
    return await http.post(stack.mcp_url, headers={
        "accept": "application/json, text/event-stream", "content-type": "application/json",
        "authorization": f"Bearer {token}"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "e2e", "version": "0"}}})


def test_a_token_minted_before_expiry_and_key_ids_is_refused_as_outdated(auth_stack) -> None:
    base = api_url(auth_stack)
    account = httpx.post(f"{base}/identity/register", json={"display_name": "old"}).json()
    # What POST /identity/mcp-token minted before tokens named their key and expired.
    old = jwt.encode({"sub": account["principal_id"], "iss": AUTH_ISSUER, "aud": AUTH_AUDIENCE,
                      "scope": "memory:read", "iat": int(time.time())},
                     AUTH_SECRET, algorithm="HS256")
    refused = post_mcp(auth_stack, f"Bearer {old}")
    assert refused.status_code == 401
    assert without_ids(refused.json()["error"]["data"]) == {
        "code": "unauthenticated", "reason": "token_outdated", "fix": "vera connect"}


def test_credentials_do_not_cross_over(auth_stack) -> None:
    base = api_url(auth_stack)
    api_key = httpx.post(f"{base}/identity/register", json={"display_name": "x"}).json()["api_key"]
    token = httpx.post(f"{base}/identity/mcp-token",
                       headers={"authorization": f"Bearer {api_key}"}).json()["access_token"]
    # No credential and an API key are both refused by the MCP server with a pointer to
    # the protected-resource metadata.
    for authorization in (None, f"Bearer {api_key}"):
        response = post_mcp(auth_stack, authorization)
        assert response.status_code == 401
        assert "oauth-protected-resource" in response.headers["www-authenticate"]
    # An MCP token is refused by the REST API.
    me = httpx.get(f"{base}/identity/me", headers={"authorization": f"Bearer {token}"})
    assert me.status_code == 401


@pytest.fixture(scope="module")
def first_admin(auth_stack) -> dict[str, str]:
    """The deployment's first administrator, made with `vera admin create-user --admin`
    (what it printed, by field)."""
    created = auth_stack.vera("admin", "create-user", "--name", "root", "--admin",
                              "--data-dir", str(auth_stack.data_dir))
    assert created.returncode == 0, created.stderr
    fields = dict(line.split(":", 1) for line in created.stdout.splitlines() if ":" in line)
    return {name: value.strip() for name, value in fields.items()}


def test_first_admin_from_the_cli_then_users_over_rest(auth_stack, first_admin) -> None:
    base = api_url(auth_stack)
    admin_key = first_admin["api_key"]
    assert first_admin["admin"] == "true"
    again = auth_stack.vera("admin", "create-user", "--name", "root2", "--admin",
                            "--data-dir", str(auth_stack.data_dir))
    assert again.returncode == 1
    user = httpx.post(f"{base}/identity/users", headers={"authorization": f"Bearer {admin_key}"},
                      json={"display_name": "carol"})
    assert user.status_code == 201
    assert user.json()["admin"] is False


async def test_someone_leaves_an_administrator_disables_them_and_every_credential_stops(
        auth_stack, first_admin) -> None:
    admin = {"authorization": f"Bearer {first_admin['api_key']}"}
    async with httpx.AsyncClient(base_url=api_url(auth_stack)) as http:
        made = await http.post("/identity/users", headers=admin, json={"display_name": "leaver"})
        assert made.status_code == 201
        leaver = made.json()
        own = {"authorization": f"Bearer {leaver['api_key']}"}
        token = (await http.post("/identity/mcp-token", headers=own)).json()["token"]
        async with mcp_client(auth_stack, token) as client:
            assert not (await client.call_tool("knowledge_bootstrap", {})).is_error

        async def listed() -> dict:
            users, page = {}, None
            while True:
                answer = (await http.get("/identity/users", headers=admin,
                                         params={"page_token": page} if page else {})).json()
                users.update({u["principal_id"]: u for u in answer["users"]})
                if not (page := answer["next_page_token"]):
                    return users[leaver["principal_id"]]

        assert await listed() == {"principal_id": leaver["principal_id"],
                                  "display_name": "leaver", "admin": False, "active": True}
        # Not a member's right, and not one's own.
        assert (await http.post(f"/identity/users/{first_admin['principal_id']}/disable",
                                headers=own)).json()["error"]["code"] == "unauthorized"
        disabled = await http.post(f"/identity/users/{leaver['principal_id']}/disable",
                                   headers=admin)
        assert disabled.status_code == 200 and disabled.json()["active"] is False
        assert (await listed())["active"] is False
        assert (await http.get("/identity/me", headers=own)).status_code == 401
        give_up = time.monotonic() + 30
        while (refused := await apost_mcp(http, auth_stack, token)).status_code != 401:
            assert time.monotonic() < give_up, refused.status_code
            await asyncio.sleep(0.5)
        assert without_ids(refused.json()["error"]["data"]) == {
            "code": "unauthenticated", "reason": "principal_disabled", "fix": "vera connect"}

        # Back again: the same key and token work once more.
        enabled = await http.post(f"/identity/users/{leaver['principal_id']}/enable",
                                  headers=admin)
        assert enabled.json()["active"] is True
        assert (await http.get("/identity/me", headers=own)).status_code == 200
        while (answer := await apost_mcp(http, auth_stack, token)).status_code != 200:
            assert time.monotonic() < give_up + 30, answer.status_code
            await asyncio.sleep(0.5)

        # A lost laptop: the administrator revokes that one key, found in the user's list.
        keys = (await http.get(f"/identity/users/{leaver['principal_id']}/api-keys",
                               headers=admin)).json()["keys"]
        assert leaver["key_id"] in {k["key_id"] for k in keys}
        revoked = await http.delete(
            f"/identity/users/{leaver['principal_id']}/api-keys/{leaver['key_id']}",
            headers=admin)
        assert revoked.json() == {"revoked": True}
        assert (await http.get("/identity/me", headers=own)).status_code == 401
