"""The GUIDE's external identity-provider path against a real OpenID Connect provider:
panva's oidc-provider (tests/e2e/oidc/provider.mjs, installed by scripts/oidc-provider) on
loopback as the deployment's identity provider, `vera up` verifying its access tokens
through the provider's published JWKS (discovered from its metadata), and the official MCP
client calling the real gateway with them.

The provider issues tokens to a confidential client (the client-credentials grant, as a CI
job or a service account gets one); the runtimes' own OAuth sign-in (Claude Code's `/mcp`,
`codex mcp login`, `opencode mcp auth`) opens a browser in each of them, and none runs
headless, so no runtime signs in here (docs/integrations.md); `vera connect` leaves the
sign-in to the runtime and `vera doctor` checks the provider it will sign in with."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import jwt
import pytest
import test_runtime_handshake as handshake
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.integrations.ownership import credential_files
from vera.integrations.runtimes import OAUTH_STEP
from vera.stack.launcher import LaunchedStack, launch, launch_env
from vera.stack.ports import free_port

pytestmark = pytest.mark.e2e
runtime_bin = handshake.runtime_bin

CHECKOUT = Path(__file__).resolve().parents[2]
AUDIENCE = "https://mcp.vera.oidc"
CLIENT_ID, CLIENT_SECRET = "vera-ci", "oidc-e2e-client-secret"
SCOPES = "memory:read memory:propose"
READY_SECONDS = 60


@dataclass(frozen=True)
class IdentityProvider:
    issuer: str
    token_endpoint: str
    jwks_uri: str

    def token(self, scope: str = SCOPES) -> str:
        """An access token for the gateway, as the client-credentials grant issues it."""
        issued = httpx.post(self.token_endpoint, auth=(CLIENT_ID, CLIENT_SECRET), timeout=30,
                            data={"grant_type": "client_credentials", "scope": scope,
                                  "resource": AUDIENCE})
        assert issued.status_code == 200, issued.text
        return issued.json()["access_token"]


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    installed = subprocess.run([str(CHECKOUT / "scripts" / "oidc-provider")],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    folder = Path(installed.stdout.strip().splitlines()[-1])
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("oidc") / "provider.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["node", "provider.mjs", issuer, str(port), AUDIENCE, CLIENT_ID, CLIENT_SECRET,
             SCOPES], cwd=folder, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while b"ready" not in log.read_bytes():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        metadata = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=30).json()
        assert metadata["issuer"] == issuer
        yield IdentityProvider(issuer, metadata["token_endpoint"], metadata["jwks_uri"])
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def oidc_stack(provider: IdentityProvider,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    """A deployment whose only token issuer is the provider (no built-in JWT secret)."""
    data_dir = tmp_path_factory.mktemp("oidc-stack") / "data"
    env = launch_env(data_dir, VERA_MCP__OAUTH_ISSUER=provider.issuer,
                     VERA_MCP__OAUTH_JWKS_URL=provider.jwks_uri,
                     VERA_MCP__OAUTH_JWKS_ALLOW_INSECURE_LOOPBACK="true",
                     VERA_MCP__AUTH_AUDIENCE=AUDIENCE)
    with launch(data_dir, env) as running:
        yield running


def client(stack: LaunchedStack, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


PROPOSAL = {"subject": "payments-api", "predicate": "deploys_to",
            "object": "the eu-west-1 cluster", "evidence_text": "runbook §2",
            "task_ref": "oidc-task-1"}


async def test_the_gateway_serves_the_providers_tokens_by_their_scopes(
        oidc_stack: LaunchedStack, provider: IdentityProvider) -> None:
    token = provider.token()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["iss"], claims["aud"], claims["sub"]) == (provider.issuer, AUDIENCE,
                                                             CLIENT_ID)
    async with client(oidc_stack, token) as session:
        boot = await session.call_tool("knowledge_bootstrap", {})
        assert not boot.is_error, boot.content
        granted = {c["class"] for c in boot.structured_content["capabilities"] if c["granted"]}
        assert granted == {"READ", "PROPOSE"}
        proposed = await session.call_tool("knowledge_propose", PROPOSAL)
        assert not proposed.is_error, proposed.content
        assert proposed.structured_content["outcome"] == "created"

    # The provider's token for reading only: the gateway holds the line on writes.
    async with client(oidc_stack, provider.token("memory:read")) as session:
        with pytest.raises(MCPError) as refused:
            await session.call_tool("knowledge_propose", {**PROPOSAL, "task_ref": "t-2"})
        data = refused.value.data
        assert (data["code"], data["required_scope"]) == ("unauthorized", "memory:propose")


def test_a_token_the_provider_did_not_sign_is_refused(
        oidc_stack: LaunchedStack, provider: IdentityProvider) -> None:
    """The provider's exact claims under another key (its own key id), and the provider's
    token sent to another audience's gateway, are both 401 before any tool runs."""
    claims = jwt.decode(provider.token(), options={"verify_signature": False})
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims, forger, algorithm="RS256", headers={"kid": "run-key"})
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "oidc-e2e", "version": "1"}}}
    for token in (forged, provider.token() + "x"):
        answer = httpx.post(oidc_stack.mcp_url, json=initialize, timeout=30, headers={
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream"})
        assert answer.status_code == 401, answer.text


def test_the_gateway_names_the_provider_for_the_runtimes_sign_in(
        oidc_stack: LaunchedStack, provider: IdentityProvider) -> None:
    """What a runtime's own OAuth reads first (RFC 9728): the provider as the gateway's
    authorization server, and the provider's metadata names the same issuer."""
    base = oidc_stack.mcp_url.removesuffix("/mcp")
    metadata = httpx.get(f"{base}/.well-known/oauth-protected-resource", timeout=30).json()
    assert metadata["resource"] == AUDIENCE
    assert metadata["authorization_servers"] == [provider.issuer]
    unauthenticated = httpx.post(oidc_stack.mcp_url, json={}, timeout=30, headers={
        "accept": "application/json, text/event-stream"})
    assert unauthenticated.status_code == 401
    assert "resource_metadata=" in unauthenticated.headers["www-authenticate"]


def test_connect_leaves_the_sign_in_to_the_runtime_and_doctor_names_the_provider(
        oidc_stack: LaunchedStack, provider: IdentityProvider, runtime_bin: Path,
        tmp_path: Path) -> None:
    """`vera connect` against this deployment stores no token (Claude Code signs in through
    the provider itself, in a browser), and `vera doctor` checks the provider it will sign
    in with instead of listing tools without a token."""
    repo, env = handshake.project(oidc_stack, runtime_bin, tmp_path)
    api_url = f"http://127.0.0.1:{oidc_stack.env['VERA_API__PORT']}"
    done = handshake.run_vera(repo, env, "connect", "claude-code", "--api-url", api_url,
                              "--mcp-url", oidc_stack.mcp_url, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert OAUTH_STEP["claude-code"] in done.stdout
    assert not (repo / credential_files("claude-code").token).exists()
    doctor = handshake.run_vera(repo, env, "doctor", "claude-code")
    [sign_in] = [line for line in doctor.stdout.splitlines() if "vera sign-in" in line]
    assert sign_in.strip().startswith("ok") and provider.issuer in sign_in, doctor.stdout
    assert "vera tools visible" not in doctor.stdout
