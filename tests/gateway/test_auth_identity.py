"""The identity side of bearer authentication, on a real identity service and PostgreSQL:
external identities map just in time to stable personal principals, only a verified email
links, and the gateway resolves a real external token through it end to end."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.config import McpSettings, ObservabilitySettings, ServiceAddresses, Settings
from vera.errors import InvalidInput
from vera.identity.v1 import identity_pb2 as pb
from vera.identity.v1 import identity_pb2_grpc
from vera.rpc.client import open_channel
from vera.services.identity import server

IDP = "https://login.idp.test"
OTHER_IDP = "https://other.idp.test"
AUDIENCE = "https://mcp.vera.test"


@dataclass
class RealIdentity:
    address: str
    stub: identity_pb2_grpc.IdentityServiceStub


@pytest.fixture
async def real_identity(pg_dsn: str) -> AsyncIterator[RealIdentity]:
    hosted = await server.create(Settings(database={"dsn": pg_dsn}), "127.0.0.1:0")
    await hosted.running.server.start()
    address = f"127.0.0.1:{hosted.running.port}"
    channel = open_channel(address, deadline_seconds=10)
    try:
        yield RealIdentity(address, identity_pb2_grpc.IdentityServiceStub(channel))
    finally:
        await channel.close()
        await hosted.running.stop(grace=0)
        await hosted.aclose()


async def ensure(stub, issuer: str, subject: str, email: str = "", verified: bool = False):
    return await stub.EnsureExternalPrincipal(
        pb.EnsureExternalPrincipalRequest(
            issuer=issuer, subject=subject, email=email, email_verified=verified
        )
    )


async def test_external_identity_maps_to_one_stable_personal_principal(real_identity):
    stub = real_identity.stub
    first = await ensure(stub, IDP, "alice")
    again = await ensure(stub, IDP, "alice")
    assert first.created is True and again.created is False
    assert again.principal.principal_id == first.principal.principal_id
    scopes = await stub.ResolveScopes(
        pb.ResolveScopesRequest(principal_id=first.principal.principal_id)
    )
    # Personal only: a JIT principal reads nothing shared until a workspace admits it.
    assert [p.kind for p in scopes.projects] == [pb.PROJECT_KIND_PERSONAL]
    assert scopes.personal_scope_id == first.principal.personal_scope_id
    # The same subject at another issuer is another person.
    other = await ensure(stub, OTHER_IDP, "alice")
    assert other.created is True
    assert other.principal.principal_id != first.principal.principal_id


async def test_only_a_verified_email_links(real_identity):
    stub = real_identity.stub
    owner = await ensure(stub, IDP, "alice", "Alice@Example.com", verified=True)
    # The same IdP asserting the same verified email for another subject links to it.
    linked = await ensure(stub, IDP, "a-123", "alice@example.COM", verified=True)
    assert linked.created is False
    assert linked.principal.principal_id == owner.principal.principal_id
    # Another IdP's verification says nothing about this IdP's accounts: no link.
    elsewhere = await ensure(stub, OTHER_IDP, "a-456", "alice@example.com", verified=True)
    assert elsewhere.created is True
    assert elsewhere.principal.principal_id != owner.principal.principal_id
    # An unverified claim of the same email gets a principal of its own.
    squatter = await ensure(stub, "https://third.idp.test", "mallory", "alice@example.com")
    assert squatter.created is True
    assert squatter.principal.principal_id != owner.principal.principal_id
    # ...and an unverified email is never stored for later linking either.
    unverified_first = await ensure(stub, IDP, "bob", "bob@example.com", verified=False)
    later = await ensure(stub, OTHER_IDP, "bob", "bob@example.com", verified=True)
    assert later.principal.principal_id != unverified_first.principal.principal_id


async def test_external_identity_input_is_bounded(real_identity):
    for issuer, subject in (("", "alice"), (IDP, ""), (IDP, "x" * 513)):
        with pytest.raises(InvalidInput):
            await ensure(real_identity.stub, issuer, subject)


async def test_gateway_maps_an_external_token_through_real_identity(real_identity, fakes, serve):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    settings = Settings(
        environment="prod",
        mcp=McpSettings(
            port=0,
            auth_audience=AUDIENCE,
            oauth_issuer=IDP,
            oauth_signing_key=pem,
            quota_enabled=False,
        ),
        services=ServiceAddresses(
            identity=real_identity.address,
            knowledge=fakes.address,
            retrieval=fakes.address,
            snapshot=fakes.address,
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )
    claims = {
        "iss": IDP,
        "sub": "carol",
        "aud": AUDIENCE,
        "scope": "memory:read",
        "exp": 4_102_444_800,
    }
    token = jwt.encode(claims, key, algorithm="RS256")
    async with serve(settings) as gw:
        principals = set()
        for _ in range(2):
            http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(gw.url, http_client=http)) as client:
                boot = (await client.call_tool("knowledge_bootstrap", {})).structured_content
            principals.add(boot["principal"]["principal_id"])
    [principal] = principals
    mapped = await ensure(real_identity.stub, IDP, "carol")
    assert mapped.created is False and mapped.principal.principal_id == principal
    uuid.UUID(principal)


async def test_an_email_an_administrator_records_links_that_issuers_token(
    real_identity, fakes, serve
):
    """POST /identity/users with email and email_issuer, then a real external token from
    that issuer asserting the verified email maps to that user; the same email recorded for
    another issuer does not link."""
    import httpx

    from vera.api.app import build_app as build_api

    root = (
        await real_identity.stub.CreateUser(pb.CreateUserRequest(display_name="root", admin=True))
    ).principal
    admin_key = (
        await real_identity.stub.CreateApiKey(
            pb.CreateApiKeyRequest(principal_id=root.principal_id)
        )
    ).api_key
    api_app = build_api(
        Settings(environment="dev", services=ServiceAddresses(identity=real_identity.address))
    )
    created = {}
    async with api_app.router.lifespan_context(api_app):
        transport = httpx.ASGITransport(app=api_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8081") as api:
            for name, email, issuer in (
                ("erin", "erin@example.com", IDP),
                ("frank", "frank@example.com", OTHER_IDP),
            ):
                reply = await api.post(
                    "/identity/users",
                    headers={"authorization": f"Bearer {admin_key}"},
                    json={"display_name": name, "email": email, "email_issuer": issuer},
                )
                assert reply.status_code == 201, reply.text
                created[name] = reply.json()["principal_id"]

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    settings = Settings(
        environment="prod",
        mcp=McpSettings(
            port=0,
            auth_audience=AUDIENCE,
            oauth_issuer=IDP,
            oauth_signing_key=pem,
            quota_enabled=False,
        ),
        services=ServiceAddresses(
            identity=real_identity.address,
            knowledge=fakes.address,
            retrieval=fakes.address,
            snapshot=fakes.address,
        ),
        observability=ObservabilitySettings(mcp_metrics_enabled=False),
    )

    async def principal_of(subject: str, email: str) -> str:
        claims = {
            "iss": IDP,
            "sub": subject,
            "aud": AUDIENCE,
            "scope": "memory:read",
            "exp": 4_102_444_800,
            "email": email,
            "email_verified": True,
        }
        token = jwt.encode(claims, key, algorithm="RS256")
        http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
        async with Client(streamable_http_client(gw.url, http_client=http)) as client:
            boot = (await client.call_tool("knowledge_bootstrap", {})).structured_content
        return boot["principal"]["principal_id"]

    async with serve(settings) as gw:
        assert await principal_of("erin-sso", "Erin@Example.com") == created["erin"]
        # frank's email is vouched for at the other issuer only: this issuer's token for it
        # gets a principal of its own.
        assert await principal_of("frank-sso", "frank@example.com") not in created.values()
