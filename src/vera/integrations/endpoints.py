"""The two URLs a setup takes (VERA_API_URL, VERA_MCP_URL): their shape, whether they
answer, which authentication profile the MCP endpoint runs, and the MCP token exchange.

Every check runs without credentials; the token exchange (``vera.integrations.credentials``)
sends a key to the REST API only, never to the MCP endpoint.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt

from vera.errors import InvalidInput

CHECK_TIMEOUT_SECONDS = 5.0
PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"
# Why the gateway refuses a built-in token that minting a new one fixes (its 401 body's
# ``data.reason``, next to ``data.fix``: ``vera connect``).
RENEWABLE = frozenset({"token_outdated", "token_expired", "key_revoked", "principal_disabled"})
AuthProfile = Literal["local-dev", "remote-authenticated", "unknown"]


def validate_url(field: str, url: str | None) -> str:
    """An http(s) URL with a host and neither credentials, query nor fragment."""
    if not url:
        raise InvalidInput(field, f"{field} is required: --{field.replace('_', '-')} or "
                           f"VERA_{field.upper()} (a local stack's: what `vera up` printed)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(field, f"{field} must be an http(s) URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise InvalidInput(field, f"{field} must not carry credentials, a query or a fragment")
    return url


@dataclass(frozen=True)
class Check:
    name: str
    url: str
    ok: bool
    detail: str  # the HTTP status or the transport failure, never a body

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name} {self.url}: {self.detail}"


@dataclass(frozen=True)
class Endpoints:
    checks: tuple[Check, ...]
    profile: AuthProfile
    authorization_servers: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


def _get(client: httpx.Client, name: str, url: str) -> tuple[Check, httpx.Response | None]:
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        return Check(name, url, False, type(exc).__name__), None
    return Check(name, url, response.status_code == 200, f"HTTP {response.status_code}"), response


def check(api_url: str, mcp_url: str) -> Endpoints:
    """API liveness and readiness, one short MCP request, and the auth profile."""
    with httpx.Client(timeout=CHECK_TIMEOUT_SECONDS, follow_redirects=False) as client:
        live, _ = _get(client, "api liveness", f"{api_url}/livez")
        ready, _ = _get(client, "api readiness", f"{api_url}/readyz")
        try:
            mcp = client.post(
                mcp_url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        except httpx.HTTPError as exc:
            reach = Check("mcp reachability", mcp_url, False, type(exc).__name__)
            return Endpoints((live, ready, reach), "unknown", ())
        # Authentication may come later: any answer but 404 or a server error proves the
        # endpoint is there.
        reachable = mcp.status_code != 404 and mcp.status_code < 500
        reach = Check("mcp reachability", mcp_url, reachable, f"HTTP {mcp.status_code}")
        servers: tuple[str, ...] = ()
        profile: AuthProfile = "local-dev" if mcp.status_code < 400 else "unknown"
        if mcp.status_code in (401, 403):
            profile = "remote-authenticated"
            parts = urlsplit(mcp_url)
            metadata_url = urlunsplit((parts.scheme, parts.netloc, PROTECTED_RESOURCE_PATH,
                                       "", ""))
            try:
                metadata = client.get(metadata_url)
                if metadata.status_code == 200:
                    servers = tuple(metadata.json().get("authorization_servers") or ())
            except (httpx.HTTPError, ValueError):
                pass
    return Endpoints((live, ready, reach), profile, servers)


def _challenge_param(header: str, name: str) -> str | None:
    match = re.search(rf'{name}="([^"]*)"', header)
    return match.group(1) if match else None


def _renewable_reason(response: httpx.Response) -> str | None:
    try:
        reason = response.json()["error"]["data"]["reason"]
    except (ValueError, KeyError, TypeError):
        return None
    return reason if reason in RENEWABLE else None


def credential_refusal(mcp_url: str, token: str | None) -> str | None:
    """Why the MCP endpoint refuses this bearer, as ``<reason>: <fix>``; None when it does not.

    A built-in token refused for a reason that a new token fixes carries that reason in the
    answer (one of :data:`RENEWABLE`), named with ``vera connect`` as the fix. Otherwise VERA
    answers every bad token alike (401 ``invalid_token``), so the token's own claims, read
    unverified by the one who holds it, tell an expired token from one minted for another
    audience (the protected-resource metadata names this server's): ``missing``,
    ``expired``, ``wrong_audience``, ``rejected``, ``insufficient_scope``.
    """
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with httpx.Client(timeout=CHECK_TIMEOUT_SECONDS, follow_redirects=False) as client:
        try:
            response = client.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   headers=headers)
        except httpx.HTTPError:
            return None  # an unreachable endpoint says nothing about the credential
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code == 403:
            scope = _challenge_param(challenge, "scope") or "the required scope"
            return (f"insufficient_scope: the token lacks {scope}; obtain a token that "
                    "grants it")
        if response.status_code != 401:
            return None
        if not token:
            return "missing: obtain an MCP token (`vera connect` asks for the API key)"
        renewable = _renewable_reason(response)
        if renewable:
            return f"{renewable}: the server refuses this token; run `vera connect`"
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return "rejected: the token is not a JWT; obtain a new MCP token"
        expiry = claims.get("exp")
        if isinstance(expiry, (int, float)) and expiry < time.time():
            return "expired: the token has expired; obtain a new MCP token"
        resource = None
        parts = urlsplit(mcp_url)
        metadata_url = _challenge_param(challenge, "resource_metadata") or urlunsplit(
            (parts.scheme, parts.netloc, PROTECTED_RESOURCE_PATH, "", ""))
        try:
            metadata = client.get(metadata_url)
            if metadata.status_code == 200:
                resource = metadata.json().get("resource")
        except (httpx.HTTPError, ValueError):
            pass
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if resource and resource not in audiences:
            return (f"wrong_audience: the token was minted for another server; obtain one "
                    f"for {resource}")
        return "rejected: the server refuses the token (signature, issuer or subject); " \
               "obtain a new MCP token"
