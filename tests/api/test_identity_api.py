"""Identity REST routes through the real ASGI app and the real identity service."""

from __future__ import annotations

import hashlib
import uuid

import asyncpg
import jwt
import pytest
from harness import LOCAL_SECRET

from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.client import open_channel

# The same values tests/api/conftest.py configures the app with.
SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"
ALL_SCOPES = ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"]


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def register_response(api, name: str = "dev"):
    response = await api.post("/identity/register", json={"display_name": name})
    assert response.status_code == 201
    return response


async def register(api, name: str = "dev") -> dict:
    return (await register_response(api, name)).json()


async def first_admin(identity_address: str) -> tuple[str, str]:
    """The bootstrap path `vera admin create-user --admin` takes: no actor, first admin."""
    channel = open_channel(identity_address, deadline_seconds=10)
    try:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        user = await stub.CreateUser(pb.CreateUserRequest(display_name="root", admin=True))
        key = await stub.CreateApiKey(pb.CreateApiKeyRequest(
            principal_id=user.principal.principal_id))
        return user.principal.principal_id, key.api_key
    finally:
        await channel.close()


def decode(token: str) -> dict:
    return jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE, issuer=ISSUER,
                      options={"require": ["sub", "iss", "aud"]})


async def test_register_returns_a_principal_and_an_api_key_shown_once(api, pg_dsn) -> None:
    account = await register(api)
    uuid.UUID(account["principal_id"])
    assert account["api_key"].startswith("vera_")
    assert account["admin"] is False
    me = await api.get("/identity/me", headers=bearer(account["api_key"]))
    assert me.status_code == 200
    assert me.json()["principal_id"] == account["principal_id"]
    # Only a digest is stored, never the key.
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch("SELECT key_id, secret_sha256 FROM identity.api_keys")
        dump = str([dict(r) for r in await conn.fetch("SELECT * FROM identity.api_keys")])
    finally:
        await conn.close()
    assert [r["key_id"] for r in rows] == [account["key_id"]]
    assert bytes(rows[0]["secret_sha256"]) == hashlib.sha256(account["api_key"].encode()).digest()
    assert account["api_key"].split("_", 2)[2] not in dump
    listed = await api.get("/identity/api-keys", headers=bearer(account["api_key"]))
    assert listed.status_code == 200
    assert "api_key" not in listed.json()["keys"][0]


async def test_no_answer_carrying_a_key_or_a_token_may_be_cached(api, identity_address) -> None:
    account = await register_response(api)
    key = account.json()["api_key"]
    _, admin = await first_admin(identity_address)
    carrying = [
        account,
        await api.post("/identity/api-keys", headers=bearer(key), json={}),
        await api.post("/identity/mcp-token", headers=bearer(key), json={}),
        await api.post("/identity/users", headers=bearer(admin), json={"display_name": "u"}),
    ]
    for response in carrying:
        assert response.status_code in (200, 201), response.text
        assert response.headers["cache-control"] == "no-store"


async def test_registration_is_closed_unless_enabled(make_api, pg_dsn) -> None:
    async with make_api(open_registration=False) as api:
        response = await api.post("/identity/register", json={"display_name": "x"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "unauthorized"
    conn = await asyncpg.connect(pg_dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM identity.principals") == 0
    finally:
        await conn.close()


async def test_register_cannot_make_an_admin(api) -> None:
    response = await api.post("/identity/register", json={"display_name": "x", "admin": True})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"


@pytest.mark.parametrize("header", [None, "Bearer", "Basic abc", "Bearer vera_nope",
                                    "Bearer vera_0123456789abcdef_" + "A" * 43])
async def test_rest_requires_a_valid_api_key(api, header) -> None:
    headers = {"authorization": header} if header else {}
    response = await api.get("/identity/me", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_an_mcp_jwt_is_never_a_rest_credential(api) -> None:
    account = await register(api)
    token = (await api.post("/identity/mcp-token", headers=bearer(account["api_key"]),
                            json={"scopes": ALL_SCOPES})).json()["access_token"]
    for path in ("/identity/me", "/identity/api-keys"):
        response = await api.get(path, headers=bearer(token))
        assert response.status_code == 401
    response = await api.post("/identity/mcp-token", headers=bearer(token))
    assert response.status_code == 401


async def test_mcp_token_defaults_to_read_only_and_never_expires(api) -> None:
    account = await register(api)
    response = await api.post("/identity/mcp-token", headers=bearer(account["api_key"]))
    assert response.status_code == 200
    body = response.json()
    assert body["expires_in"] is None
    assert body["token_type"] == "Bearer"
    claims = decode(body["access_token"])
    assert claims["sub"] == account["principal_id"]
    assert claims["scope"] == "memory:read"
    assert "exp" not in claims
    assert jwt.get_unverified_header(body["access_token"])["alg"] == "HS256"


async def test_mcp_token_carries_the_requested_subset(api) -> None:
    account = await register(api)
    response = await api.post("/identity/mcp-token", headers=bearer(account["api_key"]),
                              json={"scopes": ["memory:propose", "memory:read"]})
    assert response.status_code == 200
    assert decode(response.json()["access_token"])["scope"] == "memory:read memory:propose"


@pytest.mark.parametrize("body", [
    {"scopes": ["memory:admin"]},
    {"scopes": []},
    {"scopes": "memory:read"},
    {"principal_id": "00000000-0000-4000-8000-000000000001"},
    {"sub": "00000000-0000-4000-8000-000000000001", "scopes": ["memory:read"]},
])
async def test_mcp_token_refuses_other_principals_and_unknown_scopes(api, body) -> None:
    account = await register(api)
    response = await api.post("/identity/mcp-token", headers=bearer(account["api_key"]),
                              json=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
    assert "access_token" not in response.text


async def test_mcp_token_is_503_when_issuance_is_not_configured(identity_address, make_api
                                                               ) -> None:
    _, admin_key = await first_admin(identity_address)
    # Authenticated REST profile, but no built-in JWT: an external-OAuth-only deployment.
    async with make_api(jwt=False) as api:
        response = await api.post("/identity/mcp-token", headers=bearer(admin_key))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "unavailable"


async def test_mcp_token_needs_an_api_key(api) -> None:
    response = await api.post("/identity/mcp-token")
    assert response.status_code == 401


async def test_api_keys_create_list_revoke(api) -> None:
    account = await register(api)
    headers = bearer(account["api_key"])
    created = await api.post("/identity/api-keys", headers=headers, json={"label": "ci"})
    assert created.status_code == 201
    second = created.json()
    assert (await api.get("/identity/me", headers=bearer(second["api_key"]))).status_code == 200
    page = await api.get("/identity/api-keys", headers=headers, params={"page_size": 1})
    assert page.status_code == 200
    assert len(page.json()["keys"]) == 1
    assert page.json()["next_page_token"]
    revoked = await api.delete(f"/identity/api-keys/{second['key_id']}", headers=headers)
    assert revoked.json() == {"revoked": True}
    assert (await api.get("/identity/me", headers=bearer(second["api_key"]))).status_code == 401
    assert (await api.get("/identity/me", headers=headers)).status_code == 200
    again = await api.delete(f"/identity/api-keys/{second['key_id']}", headers=headers)
    assert again.json() == {"revoked": False}


async def test_another_principals_api_key_is_not_found(api) -> None:
    alice, bob = await register(api, "alice"), await register(api, "bob")
    response = await api.delete(f"/identity/api-keys/{alice['key_id']}",
                                headers=bearer(bob["api_key"]))
    assert response.status_code == 404
    assert (await api.get("/identity/me", headers=bearer(alice["api_key"]))).status_code == 200


async def test_only_an_admin_creates_users(api, identity_address) -> None:
    user = await register(api)
    refused = await api.post("/identity/users", headers=bearer(user["api_key"]),
                             json={"display_name": "eve", "admin": True})
    assert refused.status_code == 403
    _, admin_key = await first_admin(identity_address)
    created = await api.post("/identity/users", headers=bearer(admin_key),
                             json={"display_name": "carol", "admin": True})
    assert created.status_code == 201
    assert created.json()["admin"] is True
    me = await api.get("/identity/me", headers=bearer(created.json()["api_key"]))
    assert me.json()["admin"] is True


async def test_there_is_only_one_bootstrap_admin(identity_address) -> None:
    await first_admin(identity_address)
    with pytest.raises(Exception) as caught:
        await first_admin(identity_address)
    assert getattr(caught.value, "reason", None) == "UNAUTHORIZED"


async def test_workspace_membership_lifecycle(api) -> None:
    owner, member, outsider = [await register(api, n) for n in ("o", "m", "x")]
    ws = await api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                        json={"slug": "acme"})
    assert ws.status_code == 201
    wid = ws.json()["workspace_id"]
    path = f"/identity/workspaces/{wid}/members/{member['principal_id']}"
    # An owner's add is an invitation the member accepts (a deliberate contract change).
    invited = await api.put(path, headers=bearer(owner["api_key"]), json={"role": "curator"})
    assert invited.status_code == 202
    assert (invited.json()["role"], invited.json()["status"]) == ("curator", "pending")
    accepted = await api.post(
        f"/identity/invitations/{invited.json()['invitation_id']}/accept",
        headers=bearer(member["api_key"]), json={})
    assert accepted.status_code == 200
    assert accepted.json() == {"workspace_id": wid, "principal_id": member["principal_id"],
                               "role": "curator"}
    added = await api.put(path, headers=bearer(owner["api_key"]), json={"role": "curator"})
    assert added.status_code == 200
    assert added.json()["role"] == "curator"
    # A member that is not an owner cannot manage; an outsider sees no workspace at all.
    assert (await api.put(f"/identity/workspaces/{wid}/members/{outsider['principal_id']}",
                          headers=bearer(member["api_key"]), json={})).status_code == 403
    assert (await api.get(f"/identity/workspaces/{wid}/members",
                          headers=bearer(outsider["api_key"]))).status_code == 404
    missing = f"/identity/workspaces/{uuid.uuid4()}/members"
    assert (await api.get(missing, headers=bearer(outsider["api_key"]))).status_code == 404
    members = await api.get(f"/identity/workspaces/{wid}/members",
                            headers=bearer(member["api_key"]))
    assert {m["principal_id"]: m["role"] for m in members.json()["members"]} == {
        owner["principal_id"]: "owner", member["principal_id"]: "curator"}
    bad_role = await api.put(path, headers=bearer(owner["api_key"]), json={"role": "god"})
    assert bad_role.status_code == 400
    removed = await api.delete(path, headers=bearer(owner["api_key"]))
    assert removed.json() == {"removed": True}
    taken = await api.post("/identity/workspaces", headers=bearer(outsider["api_key"]),
                           json={"slug": "acme"})
    assert taken.status_code == 400


async def test_membership_is_an_invitation_the_invitee_accepts(api, identity_address) -> None:
    owner, invitee, other = [await register(api, n) for n in ("o", "i", "x")]
    wid = (await api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                          json={"slug": "acme"})).json()["workspace_id"]
    path = f"/identity/workspaces/{wid}/members/{invitee['principal_id']}"
    invited = await api.put(path, headers=bearer(owner["api_key"]), json={})
    assert invited.status_code == 202
    body = invited.json()
    assert body["workspace"]["workspace_id"] == wid and body["workspace"]["slug"] == "acme"
    assert (body["principal_id"], body["role"], body["inviter_principal_id"]) == (
        invitee["principal_id"], "member", owner["principal_id"])
    # Until it accepts, the invitee is no member: the workspace is invisible to it.
    assert (await api.get(f"/identity/workspaces/{wid}/members",
                          headers=bearer(invitee["api_key"]))).status_code == 404
    listed = await api.get("/identity/invitations", headers=bearer(invitee["api_key"]))
    assert listed.status_code == 200
    assert [i["invitation_id"] for i in listed.json()["invitations"]] == [body["invitation_id"]]
    assert listed.json()["next_page_token"] is None
    assert (await api.get("/identity/invitations", headers=bearer(other["api_key"]))
            ).json()["invitations"] == []
    accept = f"/identity/invitations/{body['invitation_id']}/accept"
    decline = f"/identity/invitations/{body['invitation_id']}/decline"
    for route in (accept, decline):
        stolen = await api.post(route, headers=bearer(other["api_key"]), json={})
        assert stolen.status_code == 404
        assert stolen.json()["error"]["code"] == "not_found"
    declined = await api.post(decline, headers=bearer(invitee["api_key"]), json={})
    assert declined.status_code == 200 and declined.json()["status"] == "declined"
    assert (await api.post(accept, headers=bearer(invitee["api_key"]), json={})
            ).status_code == 404

    again = (await api.put(path, headers=bearer(owner["api_key"]), json={})).json()
    joined = await api.post(f"/identity/invitations/{again['invitation_id']}/accept",
                            headers=bearer(invitee["api_key"]), json={})
    assert joined.status_code == 200
    members = await api.get(f"/identity/workspaces/{wid}/members",
                            headers=bearer(invitee["api_key"]))
    assert {m["principal_id"] for m in members.json()["members"]} == {
        owner["principal_id"], invitee["principal_id"]}

    # An administrator adds directly.
    _, admin_key = await first_admin(identity_address)
    direct = await api.put(f"/identity/workspaces/{wid}/members/{other['principal_id']}",
                           headers=bearer(admin_key), json={"role": "curator"})
    assert direct.status_code == 200
    assert direct.json() == {"principal_id": other["principal_id"], "role": "curator"}


async def test_an_administrator_records_a_users_verified_email(api, identity_address,
                                                               pg_dsn) -> None:
    _, admin_key = await first_admin(identity_address)
    created = await api.post("/identity/users", headers=bearer(admin_key), json={
        "display_name": "carol", "email": "Carol@Example.com",
        "email_issuer": "https://login.idp.test"})
    assert created.status_code == 201, created.text
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch("SELECT issuer, email, principal_id FROM identity.principal_emails")
    finally:
        await conn.close()
    assert [tuple(r) for r in rows] == [
        ("https://login.idp.test", "carol@example.com", uuid.UUID(created.json()["principal_id"]))]
    half = await api.post("/identity/users", headers=bearer(admin_key),
                          json={"display_name": "dave", "email": "dave@example.com"})
    assert half.status_code == 400
    assert half.json()["error"]["field"] == "email_issuer"
    # Self-registration cannot claim an address: it would receive that person's first login.
    claimed = await api.post("/identity/register", json={
        "display_name": "eve", "email": "carol@example.com",
        "email_issuer": "https://login.idp.test"})
    assert claimed.status_code == 400
    assert claimed.json()["error"]["code"] == "invalid_input"


async def test_attach_project_only_for_its_owner(api, identity_address) -> None:
    owner, other = await register(api, "o"), await register(api, "x")
    channel = open_channel(identity_address, deadline_seconds=10)
    try:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        project = (await stub.EnsureProject(pb.EnsureProjectRequest(
            principal_id=owner["principal_id"], slug="payments"))).project
    finally:
        await channel.close()
    ws_other = (await api.post("/identity/workspaces", headers=bearer(other["api_key"]),
                               json={"slug": "other"})).json()["workspace_id"]
    stolen = await api.post(f"/identity/workspaces/{ws_other}/projects",
                            headers=bearer(other["api_key"]), json={"project": "payments"})
    assert stolen.status_code == 404
    assert stolen.json()["error"]["code"] == "project_out_of_scope"
    ws = (await api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                         json={"slug": "acme"})).json()["workspace_id"]
    attached = await api.post(f"/identity/workspaces/{ws}/projects",
                              headers=bearer(owner["api_key"]),
                              json={"project": project.project_id})
    assert attached.status_code == 200
    assert attached.json()["workspace_id"] == ws


async def test_local_dev_rest_profile_acts_as_the_local_admin(make_api) -> None:
    async with make_api(jwt=False, environment="local") as api:
        me = await api.get("/identity/me", headers=bearer(LOCAL_SECRET))
        assert me.status_code == 200
        assert me.json()["auth_profile"] == "local-dev"
        assert me.json()["admin"] is True
        token = await api.post("/identity/mcp-token", headers=bearer(LOCAL_SECRET))
        assert token.status_code == 503


async def test_local_dev_administration_needs_the_data_dirs_secret(
        make_api, identity_rows) -> None:
    """Another user of the machine reaches the loopback API too: without the data dir's
    secret (none, a wrong one, an API key's shape) nothing is read or made, not even the
    local principal."""
    before = await identity_rows()
    async with make_api(jwt=False, environment="local") as api:
        for headers in ({}, bearer("x" * 64), bearer(LOCAL_SECRET[:-1]), bearer("vera_abc")):
            for method, path in (("GET", "/identity/me"), ("POST", "/identity/users"),
                                 ("POST", "/identity/api-keys")):
                refused = await api.request(method, path, headers=headers, json={})
                assert refused.status_code == 401, (headers, path)
                assert refused.json()["error"]["code"] == "unauthenticated"
        assert await identity_rows() == before


@pytest.mark.parametrize("hidden", ["\u202e", "\u200b", "\u2066", "\u3164", "\U000e0041"])
async def test_a_display_name_with_a_hidden_character_is_refused(api, identity_address, hidden,
                                                                 pg_dsn) -> None:
    """issue 39 item 11: a name that could pass for another's in the change feed (a bidi
    override, a zero-width or blank character) is refused, by registration and by an
    administrator alike, and no account is made."""
    _, admin = await first_admin(identity_address)
    conn = await asyncpg.connect(pg_dsn)
    try:
        before = await conn.fetchval("SELECT count(*) FROM identity.principals")
        for path, headers in (("/identity/register", {}), ("/identity/users", bearer(admin))):
            response = await api.post(path, headers=headers,
                                      json={"display_name": f"Ali{hidden}ce"})
            assert response.status_code == 400
            error = response.json()["error"]
            assert (error["code"], error["field"], error["reason"]) == (
                "invalid_input", "display_name", "hidden_character")
        assert await conn.fetchval("SELECT count(*) FROM identity.principals") == before
    finally:
        await conn.close()


async def every_page(api, path: str, key: str, items: str, id_field: str) -> list[str]:
    """``path`` read a page of one at a time to its end: the ids of every item, in order."""
    ids: list[str] = []
    token = None
    for _ in range(20):
        params = {"page_size": 1, **({"page_token": token} if token else {})}
        page = await api.get(path, headers=bearer(key), params=params)
        assert page.status_code == 200, page.text
        assert len(page.json()[items]) <= 1
        ids += [item[id_field] for item in page.json()[items]]
        token = page.json()["next_page_token"]
        if token is None:
            return ids
    raise AssertionError(f"{path} never reached its last page")


async def test_every_identity_list_pages_to_its_end_without_repeats(api) -> None:
    """The three identity lists (the curation lists are paged in test_curation_api.py):
    a page of one at a time reaches every item once."""
    owner, invitee, *people = [await register(api, n) for n in ("o", "i", "a", "b", "c")]
    for label in ("ci", "laptop"):
        assert (await api.post("/identity/api-keys", headers=bearer(owner["api_key"]),
                               json={"label": label})).status_code == 201
    keys = await every_page(api, "/identity/api-keys", owner["api_key"], "keys", "key_id")
    assert len(keys) == len(set(keys)) == 3

    wid = (await api.post("/identity/workspaces", headers=bearer(owner["api_key"]),
                          json={"slug": "paged"})).json()["workspace_id"]
    for person in people:
        invited = await api.put(f"/identity/workspaces/{wid}/members/{person['principal_id']}",
                                headers=bearer(owner["api_key"]), json={})
        accepted = await api.post(
            f"/identity/invitations/{invited.json()['invitation_id']}/accept",
            headers=bearer(person["api_key"]), json={})
        assert accepted.status_code == 200, accepted.text
    members = await every_page(api, f"/identity/workspaces/{wid}/members", owner["api_key"],
                               "members", "principal_id")
    assert sorted(members) == sorted(p["principal_id"] for p in [owner, *people])

    invitations = []
    for number, inviter in enumerate(people):
        other = (await api.post("/identity/workspaces", headers=bearer(inviter["api_key"]),
                                json={"slug": f"inviting-{number}"})).json()["workspace_id"]
        invited = await api.put(f"/identity/workspaces/{other}/members/"
                                f"{invitee['principal_id']}", headers=bearer(inviter["api_key"]),
                                json={})
        invitations.append(invited.json()["invitation_id"])
    listed = await every_page(api, "/identity/invitations", invitee["api_key"], "invitations",
                              "invitation_id")
    assert sorted(listed) == sorted(invitations)
