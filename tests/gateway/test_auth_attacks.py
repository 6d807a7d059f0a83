"""Attacks on the gateway's remote-authenticated profile, one test per case.

Each test asserts the exact HTTP status or JSON-RPC code with ``data.code``, and that
nothing happened behind the refusal: the fake services record every RPC they receive, so
"no side effect" means no write RPC (and, for HTTP refusals, no RPC at all) arrived.
Built-in tokens are HS256 with a test secret; external OIDC tokens are RS256, signed with
keys generated here and served as a JWKS by a loopback HTTP server. Time is a
controllable clock; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from harness import serve_app, without_ids
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from vera.config import McpSettings, ObservabilitySettings, ServiceAddresses, Settings
from vera.gateway.auth import BearerAuthenticator
from vera.gateway.jwks import JwksCache
from vera.gateway.tokens import TokenVerifier
from vera.mcp_tokens import KEY_ID_CLAIM
from vera.quota import InMemoryQuotaStore

SECRET = "built-in-test-secret-0123456789abcdef"
ISSUER = "https://auth.vera.test"
AUDIENCE = "https://mcp.vera.test"
OIDC_ISSUER = "https://login.idp.test"
PRINCIPAL = "22222222-2222-4222-8222-222222222222"  # the fake identity's REGISTERED_PRINCIPAL
KEY_ID = "0123456789abcdef"  # the API key built-in tokens name
ALL_SCOPES = "memory:read memory:propose memory:feedback memory:snapshot"
NOW = 1_700_000_010.0
WRITES = {"ProposeFact", "RetractProposal", "RecordFeedback", "CreateContextPack"}
PROPOSE = {"subject": "billing-service", "predicate": "uses_database", "object": "postgres"}


# ----------------------------------------------------------------------------- helpers


@dataclass
class Clock:
    now: float = NOW

    def __call__(self) -> float:
        return self.now


def counts(rec: Any) -> dict[str, int]:
    return {method: len(seen) for method, seen in rec.requests.items()}


def new_calls(rec: Any, before: dict[str, int]) -> set[str]:
    return {method for method, n in counts(rec).items() if n > before.get(method, 0)}


def new_requests(rec: Any, before: dict[str, int]) -> list[Any]:
    return [r for m, seen in rec.requests.items() for r in seen[before.get(m, 0) :]]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def builtin(secret: str = SECRET, headers: dict[str, Any] | None = None, **claims: Any) -> str:
    """A built-in token as the REST API mints it (``vera.mcp_tokens``): with an expiry and
    the API key it came from; a claim given as None is left out."""
    payload = {
        "sub": PRINCIPAL,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "scope": ALL_SCOPES,
        "exp": int(NOW) + 600,
        KEY_ID_CLAIM: KEY_ID,
        **claims,
    }
    payload = {k: v for k, v in payload.items() if v is not None}
    return jwt.encode(payload, secret, algorithm="HS256", headers=headers)


def hand_signed(header: dict[str, Any], payload: dict[str, Any], key: bytes | None) -> str:
    """A JWT assembled by hand, as an attacker would: HMAC-SHA256 over ``key`` or unsigned."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    if key is None:
        return signing_input + "."
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


@dataclass
class Idp:
    """An OIDC provider: RSA keys, a JWKS served on loopback, and a fetch counter."""

    keys: dict[str, rsa.RSAPrivateKey]
    published: list[str]  # kids currently in the JWKS
    hits: dict[str, int] = field(default_factory=dict)
    base: str = ""

    @property
    def jwks_url(self) -> str:
        return f"{self.base}/jwks"

    def public_pem(self, kid: str) -> str:
        return (
            self.keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def token(self, kid: str = "k1", headers: dict[str, Any] | None = None, **claims: Any) -> str:
        payload = {
            "sub": "alice",
            "iss": OIDC_ISSUER,
            "aud": AUDIENCE,
            "scope": ALL_SCOPES,
            "exp": int(NOW) + 600,
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(
            payload, self.keys[kid], algorithm="RS256", headers={"kid": kid, **(headers or {})}
        )


@pytest.fixture(scope="module")
def rsa_keys() -> dict[str, rsa.RSAPrivateKey]:
    return {
        kid: rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for kid in ("k1", "k2", "attacker")
    }


@pytest.fixture
async def idp(rsa_keys) -> AsyncIterator[Idp]:
    provider = Idp(keys=rsa_keys, published=["k1"])

    async def serve_jwks(request: Request) -> JSONResponse:
        provider.hits[request.url.path] = provider.hits.get(request.url.path, 0) + 1
        return JSONResponse(provider.jwks() if request.url.path == "/jwks" else {"keys": []})

    app = Starlette(routes=[Route("/{path}", serve_jwks)])
    async with serve_app(app, lifespan="off") as base:
        provider.base = base
        yield provider


def auth_settings(address: str, **mcp: Any) -> Settings:
    fields = {"port": 0, "jwt_secret": SECRET, "auth_issuer": ISSUER, "auth_audience": AUDIENCE}
    # The test IdP serves its JWKS over plain HTTP on loopback.
    fields["oauth_jwks_allow_insecure_loopback"] = True
    fields.update(mcp)
    return Settings(
        environment="prod",
        mcp=McpSettings(**{k: v for k, v in fields.items() if v is not None}),
        services=ServiceAddresses(
            identity=address, knowledge=address, retrieval=address, snapshot=address
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )


@pytest.fixture
def auth_gateway(serve, fakes):
    """``async with auth_gateway(clock=..., jwks_clock=..., **mcp) as gw``: the gateway in
    the remote-authenticated profile, against the shared fake services."""

    @contextlib.asynccontextmanager
    async def start(
        *, clock: Clock | None = None, jwks_clock: Clock | None = None, **mcp: Any
    ) -> AsyncIterator[Any]:
        settings = auth_settings(fakes.address, **mcp)
        clock = clock or Clock()
        jwks = None
        if settings.mcp.oauth_jwks_url:
            jwks = JwksCache(
                settings.mcp.oauth_jwks_url,
                cache_seconds=settings.mcp.oauth_jwks_cache_seconds,
                min_refresh_seconds=settings.mcp.oauth_jwks_min_refresh_seconds,
                clock=jwks_clock or clock,
            )
        authenticator = BearerAuthenticator(
            settings, TokenVerifier(settings, clock=clock, jwks=jwks)
        )
        async with serve(
            settings,
            authenticator=authenticator,
            quota_store=InMemoryQuotaStore(clock),
            clock=clock,
        ) as gw:
            yield gw

    return start


def bearer_client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


async def post_tool(
    url: str,
    authorization: str | None,
    tool: str = "knowledge_propose",
    arguments: dict[str, Any] | None = None,
) -> httpx.Response:
    """A raw tools/call, as a client that skips the handshake would send it."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments if arguments is not None else PROPOSE},
    }
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, headers=headers, json=body)


def assert_unauthenticated(
    gw: Any, response: httpx.Response, *, presented: bool = True, reason: str | None = None
) -> None:
    """401 with the metadata pointer; a renewable refusal (``reason``) names itself and the
    fix, any other says nothing more."""
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{gw.base}/.well-known/oauth-protected-resource"' in challenge
    assert ('error="invalid_token"' in challenge) is presented
    error = response.json()["error"]
    assert error["code"] == -32001
    renew = {"reason": reason, "fix": "vera connect"} if reason else {}
    assert without_ids(error["data"]) == {"code": "unauthenticated", **renew}


async def assert_refused(gw: Any, rec: Any, token: str, reason: str | None = None) -> None:
    """401 for ``token``, and not a single RPC reached any service."""
    before = counts(rec)
    assert_unauthenticated(gw, await post_tool(gw.url, f"Bearer {token}"), reason=reason)
    assert new_calls(rec, before) == set()


# ------------------------------------------------------------------------------- tests


async def test_no_token_is_401_with_the_metadata_pointer(auth_gateway, fakes):
    async with auth_gateway() as gw:
        before = counts(fakes.rec)
        assert_unauthenticated(gw, await post_tool(gw.url, None), presented=False)
        assert new_calls(fakes.rec, before) == set()


async def test_protected_resource_metadata(auth_gateway, idp):
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{gw.base}/.well-known/oauth-protected-resource")
    assert response.status_code == 200
    assert response.json() == {
        "resource": AUDIENCE,
        "authorization_servers": [OIDC_ISSUER],
        "scopes_supported": ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"],
        "bearer_methods_supported": ["header"],
        "resource_name": "VERA",
    }


@pytest.mark.parametrize(
    "authorization",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer not-a-jwt", "Bearer a.b.c", "Token x.y.z"],
)
async def test_malformed_credentials_are_401(auth_gateway, fakes, authorization):
    async with auth_gateway() as gw:
        before = counts(fakes.rec)
        assert_unauthenticated(gw, await post_tool(gw.url, authorization))
        assert new_calls(fakes.rec, before) == set()


async def test_an_api_key_is_not_an_mcp_credential(auth_gateway, fakes):
    async with auth_gateway() as gw:
        await assert_refused(gw, fakes.rec, "vera_ak_0123456789abcdef0123456789abcdef")


async def test_wrong_signature_is_401(auth_gateway, fakes):
    async with auth_gateway() as gw:
        await assert_refused(gw, fakes.rec, builtin(secret="another-secret-0123456789abcdefghij"))


async def test_alg_none_is_401(auth_gateway, fakes):
    payload = {"sub": PRINCIPAL, "iss": ISSUER, "aud": AUDIENCE, "scope": ALL_SCOPES}
    async with auth_gateway() as gw:
        for alg in ("none", "None", "NONE"):
            await assert_refused(
                gw, fakes.rec, hand_signed({"alg": alg, "typ": "JWT"}, payload, None)
            )


async def test_hs_rs_key_confusion_is_401(auth_gateway, fakes, idp):
    """HS256 signed with the IdP's *public* key must not verify, whichever side is asked."""
    public_pem = idp.public_pem("k1").encode()
    claims = {
        "sub": "alice",
        "iss": OIDC_ISSUER,
        "aud": AUDIENCE,
        "scope": ALL_SCOPES,
        "exp": int(NOW) + 600,
    }
    confused = hand_signed({"alg": "HS256", "typ": "JWT", "kid": "k1"}, claims, public_pem)
    as_builtin = hand_signed(
        {"alg": "HS256", "typ": "JWT"}, {**claims, "iss": ISSUER, "sub": PRINCIPAL}, public_pem
    )
    # Built-in and external both configured (the static key and the JWKS).
    async with auth_gateway(
        oauth_issuer=OIDC_ISSUER,
        oauth_jwks_url=idp.jwks_url,
        oauth_signing_key=idp.public_pem("k1"),
    ) as gw:
        await assert_refused(gw, fakes.rec, confused)
        await assert_refused(gw, fakes.rec, as_builtin)
    # External only: HS256 is in no allowlist at all.
    async with auth_gateway(
        jwt_secret=None,
        auth_issuer=None,
        oauth_issuer=OIDC_ISSUER,
        oauth_signing_key=idp.public_pem("k1"),
    ) as gw:
        await assert_refused(gw, fakes.rec, confused)
    # Built-in only: an RS256 token is refused even when it is genuinely signed.
    async with auth_gateway() as gw:
        await assert_refused(gw, fakes.rec, idp.token(iss=ISSUER, sub=PRINCIPAL))


@pytest.mark.parametrize("header", ["jku", "x5u", "jwk", "x5c"])
async def test_self_describing_key_headers_are_401_and_fetch_nothing(
    auth_gateway, fakes, idp, header
):
    attacker = f"{idp.base}/attacker"
    values = {
        "jku": attacker,
        "x5u": attacker,
        "jwk": idp.jwks()["keys"][0] | {"kid": "attacker"},
        "x5c": ["MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"],
    }
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        token = idp.token(kid="attacker", headers={header: values[header]})
        await assert_refused(gw, fakes.rec, token)
        # A genuine key with the header is still refused: the header itself is the attack.
        await assert_refused(gw, fakes.rec, idp.token(headers={header: values[header]}))
    assert idp.hits == {}  # neither the attacker's URL nor the JWKS was fetched


async def test_wrong_issuer_is_401(auth_gateway, fakes, idp):
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        for issuer in ("https://evil.test", ISSUER + "/", ISSUER.upper(), OIDC_ISSUER):
            await assert_refused(gw, fakes.rec, builtin(iss=issuer))
        for issuer in ("https://evil.test", OIDC_ISSUER + "/", ISSUER):
            await assert_refused(gw, fakes.rec, idp.token(iss=issuer))
        await assert_refused(gw, fakes.rec, builtin(iss=None))


async def test_token_for_another_resource_is_401(auth_gateway, fakes, idp):
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        for audience in ("https://other.service.test", ["https://other.service.test"], None):
            await assert_refused(gw, fakes.rec, builtin(aud=audience))
            await assert_refused(gw, fakes.rec, idp.token(aud=audience))
        # A token naming this resource among others is for this resource too.
        result = await post_tool(
            gw.url,
            f"Bearer {builtin(aud=['https://other.test', AUDIENCE])}",
            "knowledge_search",
            {"query": "q"},
        )
        assert result.status_code != 401


async def test_external_token_expiry_with_small_leeway(auth_gateway, fakes, idp):
    clock = Clock()
    async with auth_gateway(
        clock=clock, oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url, oauth_leeway_seconds=30
    ) as gw:
        token = idp.token(exp=int(NOW) + 60)
        clock.now = NOW + 60 + 29  # inside the leeway
        async with bearer_client(gw.url, token) as client:
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
        clock.now = NOW + 60 + 31  # past it
        await assert_refused(gw, fakes.rec, token)
        # An external token must carry an expiry at all.
        clock.now = NOW
        await assert_refused(gw, fakes.rec, idp.token(exp=None))
        await assert_refused(gw, fakes.rec, idp.token(exp="tomorrow"))


async def test_an_expired_builtin_token_is_token_expired(auth_gateway, fakes):
    clock = Clock()
    async with auth_gateway(clock=clock) as gw:
        await assert_refused(gw, fakes.rec, builtin(exp=int(NOW) - 3600), "token_expired")
        async with bearer_client(gw.url, builtin(exp=int(NOW) + 60)) as client:
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
            clock.now += 61 + 60  # past the expiry and the leeway
            with pytest.raises(MCPError):
                await client.call_tool("knowledge_search", {"query": "q"})
        assert_unauthenticated(
            gw,
            await post_tool(gw.url, f"Bearer {builtin(exp=int(NOW) + 60)}"),
            reason="token_expired",
        )


async def test_a_token_minted_before_expiry_and_key_ids_is_token_outdated(auth_gateway, fakes):
    async with auth_gateway() as gw:
        for outdated in (builtin(exp=None), builtin(**{KEY_ID_CLAIM: None}),
                         builtin(exp=None, **{KEY_ID_CLAIM: None}), builtin(**{KEY_ID_CLAIM: 7})):
            await assert_refused(gw, fakes.rec, outdated, "token_outdated")
            assert_unauthenticated(
                gw, await post_message(gw.url, f"Bearer {outdated}", "tools/list"),
                reason="token_outdated",
            )


async def test_a_revoked_key_stops_its_tokens_within_the_cache_window(auth_gateway, fakes):
    revoked_key = "feedfacefeedface"
    token = builtin(**{KEY_ID_CLAIM: revoked_key})
    try:
        async with auth_gateway(revocation_cache_seconds=0) as gw:
            async with bearer_client(gw.url, token) as client:
                assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
                fakes.identity.revoked_keys.add(revoked_key)
                before = counts(fakes.rec)
                with pytest.raises(MCPError):
                    await client.call_tool("knowledge_search", {"query": "q"})
                assert new_calls(fakes.rec, before) == {"CheckCredential"}
            for message in ("tools/list", "tools/call"):
                assert_unauthenticated(
                    gw, await post_message(gw.url, f"Bearer {token}", message),
                    reason="key_revoked",
                )
            # Another key of the same principal goes on working.
            async with bearer_client(gw.url, builtin()) as client:
                assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
    finally:
        fakes.identity.revoked_keys.discard(revoked_key)


async def test_a_disabled_principal_is_refused_principal_disabled(auth_gateway, fakes):
    other = "33333333-3333-4333-8333-333333333333"
    fakes.identity.known.add(other)
    fakes.identity.disabled.add(other)
    try:
        async with auth_gateway() as gw:
            assert_unauthenticated(
                gw, await post_message(gw.url, f"Bearer {builtin(sub=other)}", "tools/list"),
                reason="principal_disabled",
            )
    finally:
        fakes.identity.known.discard(other)
        fakes.identity.disabled.discard(other)


async def test_a_disabled_users_external_token_is_refused_principal_disabled(
    auth_gateway, fakes, idp
):
    fakes.identity.disabled.add("left-the-company")
    try:
        async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
            refused = await post_tool(gw.url, f"Bearer {idp.token(sub='left-the-company')}")
            assert_unauthenticated(gw, refused, reason="principal_disabled")
    finally:
        fakes.identity.disabled.discard("left-the-company")


async def test_identity_is_asked_once_per_key_and_window(auth_gateway, fakes):
    async with auth_gateway(revocation_cache_seconds=300) as gw:
        before = counts(fakes.rec)
        async with bearer_client(gw.url, builtin()) as client:
            for _ in range(5):
                assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
        assert counts(fakes.rec).get("CheckCredential", 0) - before.get("CheckCredential", 0) == 1


async def test_not_yet_valid_is_401(auth_gateway, fakes, idp):
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        await assert_refused(gw, fakes.rec, builtin(nbf=int(NOW) + 3600))
        await assert_refused(gw, fakes.rec, idp.token(nbf=int(NOW) + 3600))


async def test_unknown_kid_flood_fetches_at_most_once_per_interval_and_rotation_works(
    auth_gateway, fakes, idp
):
    jwks_clock = Clock(0.0)
    async with auth_gateway(
        jwks_clock=jwks_clock,
        oauth_issuer=OIDC_ISSUER,
        oauth_jwks_url=idp.jwks_url,
        oauth_jwks_min_refresh_seconds=30,
    ) as gw:
        async with bearer_client(gw.url, idp.token()) as client:
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
        assert idp.hits == {"/jwks": 1}
        for _ in range(40):
            forged = idp.token(kid="attacker")
            forged = jwt.encode(
                jwt.decode(forged, options={"verify_signature": False}),
                idp.keys["attacker"],
                algorithm="RS256",
                headers={"kid": uuid.uuid4().hex},
            )
            await assert_refused(gw, fakes.rec, forged)
        assert idp.hits == {"/jwks": 1}  # forty unknown kids, no refetch inside the interval
        # The IdP rotates to k2. Inside the interval the new kid is not fetched yet...
        idp.published = ["k1", "k2"]
        await assert_refused(gw, fakes.rec, idp.token(kid="k2"))
        assert idp.hits == {"/jwks": 1}
        # ...after it, one refetch picks the new key up.
        jwks_clock.now += 31
        async with bearer_client(gw.url, idp.token(kid="k2")) as client:
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
        assert idp.hits == {"/jwks": 2}


async def test_builtin_sub_must_be_a_real_principal(auth_gateway, fakes):
    async with auth_gateway() as gw:
        for sub in ("not-a-uuid", str(uuid.uuid4()), ""):
            before = counts(fakes.rec)
            assert_unauthenticated(gw, await post_tool(gw.url, f"Bearer {builtin(sub=sub)}"))
            # At most the credential check ran; no tool RPC did.
            assert new_calls(fakes.rec, before) <= {"CheckCredential"}


async def test_missing_required_scope_is_403_insufficient_scope(auth_gateway, fakes):
    async with auth_gateway() as gw:
        before = counts(fakes.rec)
        token = builtin(scope="memory:propose memory:feedback")
        response = await post_tool(gw.url, f"Bearer {token}")
        assert new_calls(fakes.rec, before) == set()
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="memory:read"' in challenge
    assert "/.well-known/oauth-protected-resource" in challenge
    error = response.json()["error"]
    assert error["code"] == -32002
    assert without_ids(error["data"]) == {"code": "unauthorized", "required_scope": "memory:read"}


async def test_read_only_token_can_never_write(auth_gateway, fakes, call_error):
    refused = {
        "knowledge_propose": (PROPOSE, "memory:propose"),
        "knowledge_retract_proposal": ({"fact_key": "f"}, "memory:propose"),
        "knowledge_feedback": (
            {"context_pack_id": "p", "result_ref": "r", "signal": "up"},
            "memory:feedback",
        ),
        "knowledge_get_context": ({"query": "q", "persist": True}, "memory:snapshot"),
    }
    async with auth_gateway() as gw, bearer_client(gw.url, builtin(scope="memory:read")) as client:
        for tool, (arguments, scope) in refused.items():
            before = counts(fakes.rec)
            error = await call_error(client, tool, arguments)
            assert error.code == -32002
            assert without_ids(error.data) == {"code": "unauthorized", "required_scope": scope}
            # Refused before the tool ran: at most the credential check happened.
            assert new_calls(fakes.rec, before) <= {"CheckCredential"}
        # The same token still reads.
        assert not (await client.call_tool("knowledge_get_context", {"query": "q"})).is_error


async def test_bootstrap_reports_the_token_grants_and_profile(auth_gateway, idp):
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        cases = [
            (builtin(scope="memory:read memory:snapshot"), {"READ", "SNAPSHOT"}),
            (idp.token(scope=None, scp=["memory:read", "memory:feedback"]), {"READ", "FEEDBACK"}),
            (builtin(), {"READ", "PROPOSE", "FEEDBACK", "SNAPSHOT"}),
        ]
        for token, expected in cases:
            async with bearer_client(gw.url, token) as client:
                boot = (await client.call_tool("knowledge_bootstrap", {})).structured_content
            assert {c["class"] for c in boot["capabilities"] if c["granted"]} == expected
            assert boot["auth_profile"] == "remote-authenticated"
            assert boot["save_mode"]["auto_propose_allowed"] is ("PROPOSE" in expected)


async def test_builtin_and_external_tokens_are_valid_at_once(auth_gateway, fakes, idp):
    async with auth_gateway(
        oauth_issuer=OIDC_ISSUER,
        oauth_jwks_url=idp.jwks_url,
        oauth_signing_key=idp.public_pem("k2"),
    ) as gw:
        principals = []
        # The built-in token, a JWKS-verified one, and one verified by the static key.
        for token in (builtin(), idp.token(), idp.token(kid="k2")):
            async with bearer_client(gw.url, token) as client:
                boot = (await client.call_tool("knowledge_bootstrap", {})).structured_content
            principals.append(boot["principal"]["principal_id"])
    mapped = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{OIDC_ISSUER}|alice"))
    assert principals == [PRINCIPAL, mapped, mapped]


async def test_only_a_verified_email_is_passed_for_linking(auth_gateway, fakes, idp):
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        for verified, expected in ((True, True), ("true", False), (None, False), (1, False)):
            token = idp.token(email="alice@example.com", email_verified=verified)
            async with bearer_client(gw.url, token) as client:
                assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
            seen = fakes.rec.last("EnsureExternalPrincipal")
            assert (seen.issuer, seen.subject) == (OIDC_ISSUER, "alice")
            assert seen.email_verified is expected


async def test_the_token_never_reaches_services_or_logs(auth_gateway, fakes, idp, caplog):
    caplog.set_level(logging.DEBUG)
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        tokens = [builtin(), idp.token(email="a@example.com", email_verified=True)]
        before = counts(fakes.rec)
        for token in tokens:
            async with bearer_client(gw.url, token) as client:
                await client.call_tool("knowledge_get_context", {"query": "q", "persist": True})
                await client.call_tool("knowledge_propose", PROPOSE)
        rejected = builtin(secret="another-secret-0123456789abcdefghij")
        await post_tool(gw.url, f"Bearer {rejected}")
        sent = new_requests(fakes.rec, before)
    assert sent
    wire = b"".join(request.SerializeToString() for request in sent)
    for token in [*tokens, rejected]:
        signature = token.rsplit(".", 1)[1]
        assert signature.encode() not in wire and token.encode() not in wire
        assert signature not in caplog.text
    # Services receive the resolved principal only.
    proposed = fakes.rec.last("ProposeFact")
    assert proposed.principal_id == str(uuid.uuid5(uuid.NAMESPACE_URL, f"{OIDC_ISSUER}|alice"))


async def test_refused_calls_use_no_quota(auth_gateway, fakes, call_error):
    async with auth_gateway(quota_read_per_minute=1, quota_propose_per_minute=1) as gw:
        for _ in range(3):
            assert (
                await post_tool(gw.url, None, "knowledge_search", {"query": "q"})
            ).status_code == 401
        async with bearer_client(gw.url, builtin(scope="memory:read")) as client:
            for _ in range(3):
                assert (await call_error(client, "knowledge_propose", PROPOSE)).code == -32002
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
            error = await call_error(client, "knowledge_search", {"query": "q"})
            assert (error.code, error.data["code"], error.data["bucket"]) == (
                -32003,
                "quota_exceeded",
                "read",
            )
        async with bearer_client(gw.url, builtin()) as client:
            # The unauthorized propose attempts left the propose budget whole.
            assert not (await client.call_tool("knowledge_propose", PROPOSE)).is_error


async def test_guard_refuses_a_request_that_bypassed_the_http_boundary(fakes):
    """Defence in depth: the guard's authenticator never invents a caller."""
    settings = auth_settings(fakes.address)
    authenticator = BearerAuthenticator(settings)
    with pytest.raises(MCPError) as caught:
        await authenticator.authenticate(None, None)  # type: ignore[arg-type]
    assert caught.value.code == -32001
    assert without_ids(caught.value.data) == {"code": "unauthenticated"}


@pytest.mark.parametrize(
    "claim",
    [
        {"exp": float("nan")},
        {"exp": float("inf")},
        {"nbf": float("-inf")},
        {"nbf": float("nan")},
        {"exp": True},
        {"exp": 10**400},  # a JSON integer no float can hold
        {"exp": 1e300},  # finite, but past any representable date
        {"nbf": -(10**20)},
    ],
)
async def test_a_time_claim_that_is_not_a_finite_date_is_401(auth_gateway, fakes, idp, claim):
    """NaN compares false with everything, so it would read as "never expires"."""
    async with auth_gateway(oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url) as gw:
        await assert_refused(gw, fakes.rec, builtin(**claim))
        await assert_refused(gw, fakes.rec, idp.token(**claim))


async def post_message(
    url: str, authorization: str | None, method: str, request_id: int | None = 7
) -> httpx.Response:
    """One raw JSON-RPC message (a request, or a notification without ``request_id``)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": {}}
    if request_id is not None:
        body["id"] = request_id
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, headers=headers, json=body)


PRINCIPAL_LOOKUPS = {"CheckCredential", "EnsureExternalPrincipal"}


async def test_discovery_asks_identity_only_whether_a_builtin_key_stands(auth_gateway, fakes, idp):
    async with auth_gateway(
        oauth_issuer=OIDC_ISSUER, oauth_jwks_url=idp.jwks_url, revocation_cache_seconds=300
    ) as gw:
        # (token, lookups during discovery): an external token acts as no one until a tool
        # runs; a built-in one's key is checked once, and the tool call reuses that verdict.
        for token, discovery_lookups in ((builtin(), {"CheckCredential"}), (idp.token(), set())):
            before = counts(fakes.rec)
            async with bearer_client(gw.url, token) as client:  # the handshake
                for _ in range(5):
                    assert (await client.list_tools()).tools
                assert new_calls(fakes.rec, before) == discovery_lookups
                assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
            after = counts(fakes.rec)
            lookups = sum(after.get(m, 0) - before.get(m, 0) for m in PRINCIPAL_LOOKUPS)
            assert lookups == 1
        # Discovery still needs a valid token with the required scopes.
        assert_unauthenticated(gw, await post_message(gw.url, None, "tools/list"), presented=False)
        forged = builtin(secret="another-secret-0123456789abcdefghij")
        assert_unauthenticated(gw, await post_message(gw.url, f"Bearer {forged}", "tools/list"))
        narrow = builtin(scope="memory:propose")
        assert (await post_message(gw.url, f"Bearer {narrow}", "tools/list")).status_code == 403


async def test_one_caller_spending_its_discovery_budget_locks_no_one_else_out(auth_gateway, fakes):
    async with auth_gateway(discovery_per_minute=3) as gw:
        flooder = f"Bearer {builtin()}"
        for _ in range(3):
            assert (await post_message(gw.url, flooder, "tools/list")).status_code == 200
        refused = await post_message(gw.url, flooder, "tools/list", request_id=41)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        body = refused.json()
        assert body["id"] == 41
        assert body["error"]["code"] == -32003
        assert without_ids(body["error"]["data"]) == {
            "code": "quota_exceeded",
            "bucket": "discovery",
            "retry_after_seconds": int(refused.headers["retry-after"]),
        }
        # Another token holder sets up its session through the official client as usual.
        other_principal = str(uuid.uuid4())
        fakes.identity.known.add(other_principal)
        other = builtin(sub=other_principal)
        async with bearer_client(gw.url, other) as client:
            assert (await client.list_tools()).tools
        # The limit is discovery's alone: the flooder's tool calls go on.
        search = await post_tool(gw.url, flooder, "knowledge_search", {"query": "q"})
        assert search.status_code == 200 and "error" not in search.json()
        assert (await post_message(gw.url, flooder, "initialize")).status_code == 429


async def test_discovery_has_a_process_ceiling_above_one_callers_limit(auth_gateway, fakes):
    async with auth_gateway(discovery_per_minute=3, discovery_ceiling_per_minute=4) as gw:
        principals = [str(uuid.uuid4()) for _ in range(3)]
        fakes.identity.known.update(principals)
        first, second, third = (f"Bearer {builtin(sub=p)}" for p in principals)
        for _ in range(3):
            assert (await post_message(gw.url, first, "tools/list")).status_code == 200
        assert (await post_message(gw.url, second, "tools/list")).status_code == 200
        for caller in (second, third):
            refused = await post_message(gw.url, caller, "tools/list")
            assert refused.status_code == 429
            assert refused.json()["error"]["data"]["bucket"] == "discovery"


async def test_a_notification_is_never_refused_by_the_discovery_limit(auth_gateway, fakes):
    # A client cannot tell which of its messages a 429 answered: the official one reports a
    # refused notifications/initialized as the failure of the tool call it sent beside it.
    async with auth_gateway(discovery_per_minute=2) as gw:
        token = f"Bearer {builtin()}"
        for _ in range(2):
            assert (await post_message(gw.url, token, "tools/list")).status_code == 200
        assert (await post_message(gw.url, token, "tools/list")).status_code == 429
        for _ in range(5):
            notified = await post_message(gw.url, token, "notifications/initialized", None)
            assert notified.status_code == 202
        assert (await post_message(gw.url, token, "tools/list")).status_code == 429
        # Only notifications: any other message without an id is metered as before.
        assert (await post_message(gw.url, token, "tools/list", None)).status_code == 429


async def test_an_oversized_body_is_413_before_any_lookup(auth_gateway, fakes):
    async with auth_gateway() as gw:
        before = counts(fakes.rec)
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {builtin()}",
        }
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"x": "'
        body += b"a" * (2 * 1024 * 1024) + b'"}}'
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(gw.url, headers=headers, content=body)
        assert response.status_code == 413
        assert without_ids(response.json()["error"]["data"]) == {
            "code": "invalid_input",
            "field": "body",
            "reason": "too_large",
        }
        # Only the token's key was checked (before the body, like the signature).
        assert new_calls(fakes.rec, before) == {"CheckCredential"}


async def open_post(url: str, authorization: str | None) -> tuple[Any, Any]:
    """A POST to ``url`` that announces a 1 MiB body and sends only its first bytes."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    head = [
        f"POST {parts.path} HTTP/1.1",
        f"host: {parts.netloc}",
        "content-type: application/json",
        "accept: application/json, text/event-stream",
        f"content-length: {1024 * 1024}",
    ]
    if authorization is not None:
        head.append(f"authorization: {authorization}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + b'{"jsonrpc": "2.0", "id": 1, ')
    await writer.drain()
    return reader, writer


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic dXNlcjpwYXNz"])
async def test_no_valid_token_is_refused_before_the_body_is_read(
    auth_gateway, fakes, authorization
):
    # The body never ends: answering at all proves the gateway did not wait to buffer it
    # (body_timeout is far away), and the connection ends with the refusal.
    async with auth_gateway(body_timeout_seconds=120) as gw:
        before = counts(fakes.rec)
        reader, writer = await open_post(gw.url, authorization)
        try:
            status_line = await asyncio.wait_for(reader.readline(), 30)
            assert status_line.split()[1] == b"401"
            await asyncio.wait_for(reader.read(), 30)  # returns at EOF: the server closed it
        finally:
            writer.close()
        assert new_calls(fakes.rec, before) == set()
