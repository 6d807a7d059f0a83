"""The console in process: sign-in and sessions, the queue and its decisions through the
knowledge service, the curator rule, CSRF and the security headers."""

from __future__ import annotations

import html
import http.server
import re
import threading
from urllib.parse import quote

import httpx
import pytest
from conftest import BASE, HARVESTED, ConsoleWorld, sign_in

from vera.api.app import build_app
from vera.api.console import pages
from vera.api.console.pages import SIGN_IN_COOKIE
from vera.api.console.sessions import COOKIE
from vera.identity.v1 import identity_pb2 as ipb
from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.client import open_channel


def _assert_secured(response: httpx.Response) -> None:
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "same-origin"


async def test_unsigned_visitors_are_sent_to_sign_in(console: httpx.AsyncClient) -> None:
    response = await console.get("/console/")
    assert response.status_code == 303
    assert response.headers["location"] == "/console/sign-in"
    _assert_secured(response)
    form = await console.get("/console/sign-in")
    assert form.status_code == 200
    _assert_secured(form)
    static = await console.get("/console/static/console.js")
    assert static.status_code == 200
    _assert_secured(static)


async def test_api_key_becomes_a_strict_httponly_session(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    form = await console.get("/console/sign-in")
    nonce = form.text.split('name="nonce" value="')[1].split('"')[0]
    wrong = await console.post("/console/sign-in",
                               data={"nonce": nonce, "api_key": "vera_not-a-key"})
    assert wrong.status_code == 401
    assert COOKIE not in console.cookies
    await sign_in(console, world.curator.api_key)
    cookie = next(c for c in console.cookies.jar if c.name == COOKIE)
    assert cookie.has_nonstandard_attr("HttpOnly")
    assert cookie.get_nonstandard_attr("SameSite", "").lower() == "strict"
    assert not cookie.secure  # plain http here; https below
    assert world.curator.api_key not in cookie.value


async def test_session_cookie_is_secure_over_https(world: ConsoleWorld) -> None:
    app = build_app(world.settings(allowed_origins=["https://127.0.0.1:8081"]))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="https://127.0.0.1:8081") as client:
            form = await client.get("/console/sign-in")
            nonce = form.text.split('name="nonce" value="')[1].split('"')[0]
            signed = await client.post("/console/sign-in",
                                       data={"nonce": nonce, "api_key": world.curator.api_key})
            assert signed.status_code == 303
            assert "secure" in signed.headers["set-cookie"].lower()


async def test_cookies_are_secure_behind_a_tls_terminating_ingress(world: ConsoleWorld) -> None:
    """issue 39 item 13: TLS ends at the Ingress, so the API sees plain http; with the
    chart's VERA_API__SECURE_COOKIES every console cookie is still Secure."""
    app = build_app(world.settings(secure_cookies=True))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1:8081") as client:
            form = await client.get("/console/sign-in")
            assert form.status_code == 200
            assert "secure" in form.headers["set-cookie"].lower()  # the sign-in nonce
            nonce = form.text.split('name="nonce" value="')[1].split('"')[0]
            # The browser speaks https to the Ingress, so it sends its Secure cookies back,
            # which this client, speaking http, would not: sent by hand.
            signed = await client.post(
                "/console/sign-in", data={"nonce": nonce, "api_key": world.curator.api_key},
                headers={"cookie": f"{SIGN_IN_COOKIE}={form.cookies[SIGN_IN_COOKIE]}"})
            assert signed.status_code == 303
            assert COOKIE in signed.headers["set-cookie"]
            assert all("secure" in c.lower() for c in signed.headers.get_list("set-cookie"))


async def test_sign_in_without_the_forms_nonce_is_refused(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    response = await console.post("/console/sign-in", data={"api_key": world.curator.api_key})
    assert response.status_code == 403
    assert COOKIE not in console.cookies


async def test_curator_verifies_and_rejects_through_the_queue(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    first = (await world.propose("payments-api")).fact.fact_key
    second = (await world.propose("refunds-api")).fact.fact_key
    token = await sign_in(console, world.curator.api_key)
    queue = await console.get(f"/console/projects/{world.project_id}/")
    assert queue.status_code == 200
    _assert_secured(queue)
    assert first in queue.text and second in queue.text
    assert "github.com/acme/payments" in queue.text and "payments-api/handler.py" in queue.text

    base = f"/console/projects/{world.project_id}/proposals"
    verified = await console.post(f"{base}/{first}/verify", data={
        "csrf_token": token, "trust_tier": "0", "authority": "0.9", "note": "checked"})
    assert verified.status_code == 303
    assert verified.headers["location"].endswith("?done=verified")
    no_reason = await console.post(f"{base}/{second}/reject",
                                   data={"csrf_token": token, "reason": ""})
    assert no_reason.status_code == 400
    # The REST route's own body and rules (vera.api.curating): what it refuses is refused.
    for bad in ({"authority": "2"}, {"authority": "nan"}, {"trust_tier": "one"}):
        refused = await console.post(f"{base}/{second}/verify", data={"csrf_token": token,
                                                                        **bad})
        assert refused.status_code == 400 and 'data-code="invalid_input"' in refused.text, bad
    rejected = await console.post(f"{base}/{second}/reject",
                                  data={"csrf_token": token, "reason": "not durable"})
    assert rejected.status_code == 303

    pending = await world.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(scope_id=world.project_id))
    assert pending.total == 0
    changes = await world.knowledge.ListScopeChanges(
        kpb.ListScopeChangesRequest(scope_ids=[world.project_id]))
    published = [c.fact for c in changes.changes if c.change == "published"]
    assert [(f.subject, f.trust_tier, round(f.authority, 2)) for f in published] == [
        ("payments-api", 0, 0.9)]
    feed = await console.get(f"/console/projects/{world.project_id}/changes")
    assert feed.status_code == 200 and 'data-change="published"' in feed.text
    # Beside each actor's name, the stable handle no other principal carries.
    handle = world.curator.principal_id.replace("-", "")[:8]
    assert f'data-handle title="the principal\'s stable handle">{handle}<' in feed.text
    # A label a curator reads, not the feed's code (issue 41).
    assert "<td>Published</td>" in feed.text and "<td>published</td>" not in feed.text


async def test_conflicting_fact_is_shown_beside_the_proposal(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
        principal_id=world.owner.principal_id, scope_id=world.project_id,
        facts=[kpb.FactInput(subject="payments-api", predicate="uses_database",
                             object="PostgreSQL 14")]))
    refused = await world.propose("payments-api", "uses_database", "PostgreSQL 16")
    assert refused.outcome == kpb.PROPOSAL_OUTCOME_CONFLICTED
    await sign_in(console, world.curator.api_key)
    queue = await console.get(f"/console/projects/{world.project_id}/")
    attempt = queue.text.split('class="attempt"')[1]
    assert "PostgreSQL 16" in attempt and "PostgreSQL 14" in attempt
    assert 'data-count="conflicted">1<' in queue.text


async def test_a_post_without_the_sessions_token_changes_nothing(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    key = (await world.propose("payments-api")).fact.fact_key
    await sign_in(console, world.curator.api_key)
    url = f"/console/projects/{world.project_id}/proposals/{key}/verify"
    for data in ({}, {"csrf_token": "forged"}):
        refused = await console.post(url, data=data)
        assert refused.status_code == 403
    # The guard refuses another origin before the console sees the request.
    cross = await console.post(url, data={"csrf_token": "x"},
                               headers={"origin": "http://evil.example"})
    assert cross.status_code == 403
    pending = await world.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(scope_id=world.project_id))
    assert pending.total == 1


async def test_sign_out_ends_the_session_server_side(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    key = (await world.propose("payments-api")).fact.fact_key
    token = await sign_in(console, world.curator.api_key)
    copied = console.cookies[COOKIE]
    out = await console.post("/console/sign-out", data={"csrf_token": token})
    assert out.status_code == 303
    console.cookies.set(COOKIE, copied, domain="127.0.0.1")
    page = await console.get(f"/console/projects/{world.project_id}/")
    assert page.status_code == 303 and page.headers["location"] == "/console/sign-in"
    replay = await console.post(f"/console/projects/{world.project_id}/proposals/{key}/verify",
                                data={"csrf_token": token, "trust_tier": "1",
                                      "authority": "0.7"})
    assert replay.status_code == 403
    pending = await world.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(scope_id=world.project_id))
    assert pending.total == 1


async def test_only_curators_see_a_projects_queue(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    await world.propose("payments-api")
    await sign_in(console, world.member.api_key)
    home = await console.get("/console/")
    assert home.status_code == 200 and 'data-project="payments"' not in home.text
    refused = await console.get(f"/console/projects/{world.project_id}/")
    assert refused.status_code == 403 and 'data-code="unauthorized"' in refused.text
    assert "payments-api" not in refused.text


async def test_outsiders_cannot_tell_a_project_exists(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    await sign_in(console, world.outsider.api_key)
    refused = await console.get(f"/console/projects/{world.project_id}/")
    assert refused.status_code == 404


async def test_home_lists_curated_projects_with_counts(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    await world.propose("payments-api")
    await world.propose("refunds-api")
    token = await sign_in(console, world.curator.api_key)
    assert token
    home = await console.get("/console/")
    row = home.text.split('data-project="payments"')[1].split("</tr>")[0]
    assert 'data-count="pending">2<' in row


async def test_the_local_sign_in_token_works_once(world: ConsoleWorld) -> None:
    token = "local-one-time-token-0123456789abcdef-XYZ"
    settings = world.settings(console_sign_in_token=token).model_copy(
        update={"environment": "local", "mcp": world.settings().mcp.model_copy(
            update={"jwt_secret": None})})
    assert settings.auth_profile == "local-dev"
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url=BASE) as client:
            wrong = await client.get("/console/sign-in", params={"token": "x" * 40})
            assert wrong.status_code == 401
            first = await client.get("/console/sign-in", params={"token": token})
            assert first.status_code == 303 and COOKIE in client.cookies
            assert (await client.get("/console/")).status_code == 200
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url=BASE) as other:
                again = await other.get("/console/sign-in", params={"token": token})
                assert again.status_code == 401 and COOKIE not in other.cookies


async def test_source_retraction_is_previewed_then_confirmed(
    world: ConsoleWorld, console: httpx.AsyncClient, pg_dsn: str
) -> None:
    import asyncpg

    await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
        principal_id=world.owner.principal_id, scope_id=world.project_id,
        sources=[kpb.SourceInput(source_id="adr-7", title="ADR 7"),
                 kpb.SourceInput(source_id="runbook-3")],
        facts=[kpb.FactInput(subject="ledger", predicate="uses", object="PostgreSQL",
                             source_id="adr-7"),
               kpb.FactInput(subject="ledger", predicate="deploys_to", object="eu-west-1",
                             source_id="adr-7"),
               kpb.FactInput(subject="ledger", predicate="deploys_to", object="eu-west-1",
                             source_id="runbook-3")]))
    token = await sign_in(console, world.curator.api_key)
    listed = await console.get(f"/console/projects/{world.project_id}/sources")
    assert listed.status_code == 200
    row = listed.text.split('data-source-id="adr-7"')[1].split("</tr>")[0]
    assert 'data-count="cited">2<' in row

    async def written() -> tuple[int, int]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return (await conn.fetchval("SELECT count(*) FROM knowledge.audit_events"),
                    await conn.fetchval("SELECT coalesce(max(position), 0) FROM knowledge.outbox"))
        finally:
            await conn.close()

    before = await written()
    url = f"/console/projects/{world.project_id}/sources/adr-7/retract"
    preview = await console.get(url)
    assert preview.status_code == 200
    retracted = preview.text.split('data-preview="retracted"')[1].split("</ul>")[0]
    kept = preview.text.split('data-preview="still-supported"')[1].split("</ul>")[0]
    assert "PostgreSQL" in retracted and "eu-west-1" not in retracted
    assert "eu-west-1" in kept
    assert await written() == before  # the preview wrote nothing

    facts = await world.knowledge.GetEntity(kpb.GetEntityRequest(
        scope_ids=[world.project_id], name="ledger"))
    uses = next(f.fact_key for f in facts.facts if f.predicate == "uses")
    assert f'data-fact-key="{uses}"' in retracted

    no_reason = await console.post(url, data={"csrf_token": token, "reason": ""})
    assert no_reason.status_code == 400
    done = await console.post(url, data={"csrf_token": token, "reason": "superseded"})
    assert done.status_code == 303 and done.headers["location"].endswith("?done=retracted")
    audits, position = await written()
    assert audits == before[0] + 1 and position > before[1]
    feed = await world.knowledge.ListScopeChanges(kpb.ListScopeChangesRequest(
        scope_ids=[world.project_id], changes=["retracted"]))
    assert [c.fact.fact_key for c in feed.changes] == [uses]


async def test_the_agent_preview_sends_a_read_only_token_that_expires() -> None:
    """The preview's own request, caught by a loopback listener standing in for the MCP
    server: it carries a read-only token that ends after PREVIEW_TOKEN_SECONDS."""
    import jwt

    from vera.api.auth import RestCaller
    from vera.api.console.agent_preview import PREVIEW_TOKEN_SECONDS, served_context
    from vera.config import Settings
    from vera.errors import Unavailable

    seen: list[str] = []

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("authorization", ""))
            self.send_error(503)

        def log_message(self, *args: object) -> None:
            pass

    listener = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        settings = Settings(environment="dev", mcp={
            "jwt_secret": "preview-secret-0123456789abcdef0123456789",
            "auth_issuer": "https://auth.example", "auth_audience": "https://mcp.example"},
            api={"console_mcp_url": f"http://127.0.0.1:{listener.server_port}/mcp"})
        with pytest.raises(Unavailable):
            await served_context(settings, RestCaller("p-1", "dev", key_id="0123456789abcdef"),
                                 "project-1", "a task")
    finally:
        listener.shutdown()
        listener.server_close()
    assert seen and seen[0].startswith("Bearer ")
    claims = jwt.decode(seen[0].removeprefix("Bearer "), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == PREVIEW_TOKEN_SECONDS
    assert claims["scope"] == "memory:read" and claims["sub"] == "p-1"
    assert claims["vera_key_id"] == "0123456789abcdef"


async def test_the_queue_pages_through_every_proposal(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    keys = [(await world.propose(f"service-{i:02d}")).fact.fact_key for i in range(55)]
    await sign_in(console, world.curator.api_key)
    first = await console.get(f"/console/projects/{world.project_id}/")
    shown = first.text.count('<article class="proposal"')
    assert shown == 50 and 'data-count="pending">55<' in first.text
    next_url = first.text.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = await console.get(next_url.replace("&amp;", "&"))
    assert second.status_code == 200
    rest = [k for k in keys if f'data-fact-key="{k}"' in second.text]
    assert rest == keys[50:]


async def test_two_person_verification_is_shown_switched_by_the_owner_and_enforced(
        world: ConsoleWorld, console: httpx.AsyncClient) -> None:
    """issue 39 item 16 in the console: every curator sees the setting, only the owner
    has the switch, and with it on a curator's verify of their own proposal is refused
    with its code and reason."""
    own = (await world.knowledge.ProposeFact(kpb.ProposeFactRequest(
        principal_id=world.curator.principal_id,
        personal_scope_id=world.curator.personal_scope_id,
        readable_scope_ids=[world.curator.personal_scope_id, world.project_id],
        target_scope_id=world.project_id, subject="ledger", predicate="depends_on",
        object="kafka", evidence_text="seen"))).fact.fact_key
    project_page = f"/console/projects/{world.project_id}/"
    token = await sign_in(console, world.curator.api_key)
    page = await console.get(project_page)
    assert 'data-setting="two_person_verification" data-value="off"' in page.text
    assert 'data-action="two-person-verification"' not in page.text  # not the owner
    refused = await console.post(f"/console/projects/{world.project_id}/settings",
                                 data={"csrf_token": token, "two_person_verification": "on"})
    assert refused.status_code == 403 and 'data-code="unauthorized"' in refused.text

    token = await sign_in(console, world.owner.api_key)
    page = await console.get(project_page)
    assert 'data-action="two-person-verification"' in page.text
    switched = await console.post(f"/console/projects/{world.project_id}/settings",
                                  data={"csrf_token": token, "two_person_verification": "on"})
    assert switched.status_code == 303 and switched.headers["location"].endswith("done=settings")

    token = await sign_in(console, world.curator.api_key)
    page = await console.get(project_page)
    assert 'data-setting="two_person_verification" data-value="on"' in page.text
    verify = await console.post(
        f"/console/projects/{world.project_id}/proposals/{own}/verify",
        data={"csrf_token": token})
    assert verify.status_code == 403
    assert 'data-code="unauthorized" data-reason="two_person_verification"' in verify.text
    pending = await world.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(scope_id=world.project_id))
    assert [p.fact_key for p in pending.proposals] == [own]


async def test_source_ids_holding_slashes_are_linked_as_one_encoded_segment(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    """Issue 39 item 10: a source id with "/" (a harvested file) is previewed and retracted
    from its link, and one with "../" cannot steer the link out of its project."""
    ids = ["docs/adr/7.md", "../../other/sources/x"]
    await world.knowledge.IngestKnowledge(kpb.IngestKnowledgeRequest(
        principal_id=world.owner.principal_id, scope_id=world.project_id,
        sources=[kpb.SourceInput(source_id=i) for i in ids],
        facts=[kpb.FactInput(subject="ledger", predicate="documented_in", object=i,
                             source_id=i) for i in ids]))
    token = await sign_in(console, world.curator.api_key)
    listed = await console.get(f"/console/projects/{world.project_id}/sources")
    project = f"/console/projects/{world.project_id}/sources/"
    for source_id in ids:
        link = f'href="{project}{quote(source_id, safe="")}/retract"'
        assert link in listed.text, source_id
        preview = await console.get(f"{project}{quote(source_id, safe='')}/retract")
        assert preview.status_code == 200, source_id
        assert f'/sources/{quote(source_id, safe="")}/retract"' in preview.text
        done = await console.post(f"{project}{quote(source_id, safe='')}/retract",
                                  data={"csrf_token": token, "reason": "moved"})
        assert done.status_code == 303, source_id
        assert done.headers["location"] == f"{project.rstrip('/')}?done=retracted"
    feed = await world.knowledge.ListScopeChanges(kpb.ListScopeChangesRequest(
        scope_ids=[world.project_id], changes=["retracted"]))
    assert sorted(c.fact.object for c in feed.changes) == sorted(ids)


API_FILE = "services/api/pyproject.toml"
COMPOSE_FILE = "compose.yaml"
HARVEST = {
    API_FILE: [("depends_on", "asyncpg==0.29.0", "6", '  "asyncpg==0.29.0",'),
               ("depends_on", "fastapi==0.115.0", "7", '  "fastapi==0.115.0",')],
    COMPOSE_FILE: [("uses_image", "postgres:16", "3-4", "  db:\n    image: postgres:16")],
}


async def test_bulk_review_decides_a_harvests_files_a_group_at_a_time(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    filed = await world.propose_harvest(HARVEST)
    api_keys, compose_keys = filed.fact_keys[:2], filed.fact_keys[2:]
    agents = (await world.propose("payments-api")).fact.fact_key
    token = await sign_in(console, world.curator.api_key)
    page = await console.get(f"/console/projects/{world.project_id}/harvests")
    assert page.status_code == 200
    _assert_secured(page)
    # One harvest, its two files each a group with its evidence lines; the agent's
    # proposal (no source) stays in the queue.
    assert page.text.count('class="group harvest"') == 1
    for path in (API_FILE, COMPOSE_FILE):
        assert f'data-source-id="{HARVESTED}/{path}"' in page.text
    assert '<pre class="evidence">  db:\n    image: postgres:16</pre>' in page.text
    assert "<span class=\"meta\" data-locator>3-4</span>" in page.text
    assert agents not in page.text and 'data-count="uncited">1<' in page.text
    assert f'value="{" ".join(api_keys)}"' in page.text

    base = f"/console/projects/{world.project_id}/harvests"
    forged = await console.post(f"{base}/verify", data={"fact_keys": " ".join(api_keys)})
    assert forged.status_code == 403
    no_reason = await console.post(f"{base}/reject", data={
        "csrf_token": token, "fact_keys": " ".join(compose_keys), "reason": ""})
    assert no_reason.status_code == 400
    empty = await console.post(f"{base}/verify", data={"csrf_token": token, "fact_keys": ""})
    assert empty.status_code == 400 and 'data-code="invalid_input"' in empty.text
    verified = await console.post(f"{base}/verify", data={
        "csrf_token": token, "fact_keys": " ".join(api_keys), "trust_tier": "1",
        "authority": "0.8", "note": ""})
    assert verified.status_code == 303
    assert verified.headers["location"].endswith("/harvests?done=verified")
    rejected = await console.post(f"{base}/reject", data={
        "csrf_token": token, "fact_keys": " ".join(compose_keys), "reason": "dev only"})
    assert rejected.status_code == 303

    pending = await world.knowledge.ListPendingProposals(
        kpb.ListPendingProposalsRequest(scope_id=world.project_id))
    assert [p.fact_key for p in pending.proposals] == [agents]
    published = await world.knowledge.ListScopeChanges(
        kpb.ListScopeChangesRequest(scope_ids=[world.project_id]))
    facts = [c.fact for c in published.changes if c.change == "published"]
    assert sorted(f.object for f in facts) == ["asyncpg==0.29.0", "fastapi==0.115.0"]
    assert {(f.trust_tier, round(f.authority, 2)) for f in facts} == {(1, 0.8)}
    assert {c.source_id for f in facts for c in f.citations} == {f"{HARVESTED}/{API_FILE}"}


async def test_administrators_read_the_audit_trail_paged_and_filtered(
    world: ConsoleWorld, console: httpx.AsyncClient
) -> None:
    channel = open_channel(world.identity_address, 10.0)
    identity = IdentityServiceStub(channel)
    try:
        admin = (await identity.CreateUser(ipb.CreateUserRequest(
            display_name="root", admin=True))).principal
        for _ in range(pages.AUDIT_PAGE):  # more records than one page holds
            key = await identity.CreateApiKey(ipb.CreateApiKeyRequest(
                principal_id=admin.principal_id, label="console"))
        for disabled in (True, False):
            await identity.SetUserDisabled(ipb.SetUserDisabledRequest(
                actor_principal_id=admin.principal_id,
                principal_id=world.outsider.principal_id, disabled=disabled))
    finally:
        await channel.close()

    await sign_in(console, world.member.api_key)  # not an administrator
    refused = await console.get("/console/audit/identity")
    assert refused.status_code == 403 and 'data-code="unauthorized"' in refused.text
    home = await console.get("/console/")
    assert "/console/audit/" not in home.text

    await sign_in(console, key.api_key)
    home = await console.get("/console/")
    assert 'href="/console/audit/identity"' in home.text
    first = await console.get("/console/audit/identity")
    assert first.status_code == 200
    _assert_secured(first)
    seqs = [int(s) for s in re.findall(r'data-seq="(\d+)"', first.text)]
    assert seqs == list(range(1, pages.AUDIT_PAGE + 1))  # a full page, oldest first
    later = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert later is not None
    second = await console.get(html.unescape(later[1]))
    assert re.findall(r'data-seq="(\d+)"', second.text)[:1] == [str(pages.AUDIT_PAGE + 1)]
    head = int(re.findall(r'data-head-seq="(\d+)"', first.text)[0])
    assert head == seqs[-1] + len(re.findall(r'data-seq="', second.text))

    only = await console.get("/console/audit/identity", params={"action": "user.disabled"})
    rows = re.findall(r'<tr data-seq="\d+" data-action="([^"]+)">', only.text)
    assert rows == ["user.disabled"]
    assert world.outsider.principal_id in only.text
    assert key.api_key not in first.text + second.text

    knowledge = await console.get("/console/audit/knowledge")
    assert knowledge.status_code == 200
    unknown = await console.get("/console/audit/retrieval")
    assert unknown.status_code == 400 and 'data-code="invalid_input"' in unknown.text


class Reports:
    """Stands in for identity's RecordRefusals."""

    def __init__(self) -> None:
        self.counts: list[tuple[str, str, str, int]] = []

    async def RecordRefusals(self, request):
        self.counts += [(request.source, c.action, c.reason, c.count) for c in request.counts]


async def test_console_refusals_are_counted_for_the_audit_trail(world: ConsoleWorld) -> None:
    app = build_app(world.settings())
    reports = Reports()
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        await sign_in(client, world.member.api_key)
        for _ in range(2):
            assert (await client.get("/console/audit/identity")).status_code == 403
        await app.state.refusals.report(reports, 60)
    assert reports.counts == [("api", "authorization.refused", "unauthorized", 2)]
