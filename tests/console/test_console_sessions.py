"""Console sessions end with the API key they were signed in with, and one principal's
sign-ins never evict another's session."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
from conftest import BASE, SECRET, ConsoleWorld, sign_in
from starlette.applications import Starlette

from vera.api.app import build_app
from vera.api.console.sessions import MAX_SESSIONS_PER_PRINCIPAL
from vera.config import Settings
from vera.identity.v1 import identity_pb2 as ipb
from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
from vera.rpc.client import open_channel


def app_for(world: ConsoleWorld, recheck_seconds: float) -> Starlette:
    return build_app(Settings(
        environment="dev", mcp={"jwt_secret": SECRET, "revocation_cache_seconds": recheck_seconds},
        services={"identity": world.identity_address, "knowledge": world.knowledge_address}))


@contextlib.asynccontextmanager
async def browsers(app: Starlette) -> AsyncIterator[object]:
    """``async with browsers(app) as new: browser = await new()``: clients of one app, each
    with its own cookie jar, as separate browsers."""
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))

        async def new() -> httpx.AsyncClient:
            return await stack.enter_async_context(httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url=BASE))

        yield new


async def signed_in(browser: httpx.AsyncClient) -> bool:
    page = await browser.get("/console/")
    assert page.status_code in (200, 303), page.status_code
    return page.status_code == 200


async def test_revoking_the_key_ends_its_console_sessions(world: ConsoleWorld) -> None:
    app = app_for(world, recheck_seconds=0)
    async with browsers(app) as new:
        api = await new()
        second = await api.post("/identity/api-keys", json={"label": "laptop"},
                                headers={"authorization": f"Bearer {world.curator.api_key}"})
        assert second.status_code == 201
        doomed, kept, other = await new(), await new(), await new()
        await sign_in(doomed, second.json()["api_key"])
        await sign_in(kept, world.curator.api_key)
        await sign_in(other, world.owner.api_key)
        assert [await signed_in(b) for b in (doomed, kept, other)] == [True, True, True]

        revoked = await api.delete(f"/identity/api-keys/{second.json()['key_id']}",
                                   headers={"authorization": f"Bearer {world.curator.api_key}"})
        assert revoked.json() == {"revoked": True}
        assert not await signed_in(doomed)
        assert (await doomed.get("/console/")).headers["location"] == "/console/sign-in"
        # The same curator's session of a key that stands, and everyone else's, go on.
        assert [await signed_in(b) for b in (kept, other)] == [True, True]


async def test_a_key_is_rechecked_only_after_the_window(world: ConsoleWorld) -> None:
    app = app_for(world, recheck_seconds=300)
    async with browsers(app) as new:
        api, browser = await new(), await new()
        second = await api.post("/identity/api-keys", json={"label": "laptop"},
                                headers={"authorization": f"Bearer {world.curator.api_key}"})
        await sign_in(browser, second.json()["api_key"])
        await api.delete(f"/identity/api-keys/{second.json()['key_id']}",
                         headers={"authorization": f"Bearer {world.curator.api_key}"})
        assert await signed_in(browser)  # within the window the sign-in's verdict holds
        session = next(iter(app.state.console_sessions._sessions.values()))
        session.key_checked -= 300
        assert not await signed_in(browser)


async def test_sign_ins_evict_only_the_same_principals_oldest_session(
        world: ConsoleWorld) -> None:
    app = app_for(world, recheck_seconds=300)
    async with browsers(app) as new:
        owner = await new()
        await sign_in(owner, world.owner.api_key)
        curators = [await new() for _ in range(MAX_SESSIONS_PER_PRINCIPAL + 1)]
        for browser in curators:
            await sign_in(browser, world.curator.api_key)
        assert await signed_in(owner)
        assert [await signed_in(b) for b in curators] == [False] + [True] * (
            MAX_SESSIONS_PER_PRINCIPAL)


async def test_disabling_the_user_ends_their_console_sessions(world: ConsoleWorld) -> None:
    app = app_for(world, recheck_seconds=0)
    channel = open_channel(world.identity_address, 10.0)
    identity = IdentityServiceStub(channel)
    try:
        root = (await identity.CreateUser(ipb.CreateUserRequest(
            display_name="root", admin=True))).principal
        async with browsers(app) as new:
            curator, owner = await new(), await new()
            await sign_in(curator, world.curator.api_key)
            await sign_in(owner, world.owner.api_key)
            await identity.SetUserDisabled(ipb.SetUserDisabledRequest(
                actor_principal_id=root.principal_id,
                principal_id=world.curator.principal_id, disabled=True))
            assert not await signed_in(curator)
            assert await signed_in(owner)
    finally:
        await channel.close()


async def test_owners_see_the_workspaces_members_and_roles(world: ConsoleWorld) -> None:
    app = app_for(world, recheck_seconds=300)
    async with browsers(app) as new:
        owner, curator = await new(), await new()
        await sign_in(owner, world.owner.api_key)
        await sign_in(curator, world.curator.api_key)
        page = await owner.get(f"/console/projects/{world.project_id}/members")
        assert page.status_code == 200
        for user, role in ((world.owner, "owner"), (world.curator, "curator"),
                           (world.member, "member")):
            row = page.text.split(f'data-principal-id="{user.principal_id}"')[1].split("</tr>")[0]
            assert f'data-role="{role}"' in row
            assert f'<th scope="row">{role}</th>' in row  # the world names users by role
        assert world.outsider.principal_id not in page.text
        # A curator reviews proposals; who belongs is the owners' to see and decide.
        refused = await curator.get(f"/console/projects/{world.project_id}/members")
        assert refused.status_code == 403
