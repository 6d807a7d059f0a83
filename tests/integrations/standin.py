"""A loopback stand-in for a VERA deployment (REST probes, token exchange, a stateless JSON
MCP endpoint) so connect, disconnect and the runtime CLIs can be driven without the stack.

``auth``: None is the local-dev profile (no token); a string is the only bearer the MCP
endpoint accepts, handed out by POST /identity/mcp-token for API key ``API_KEY`` (or
``minted``, when the exchange should hand out another token). Like the gateway, any other
bearer gets 401 ``invalid_token`` whatever the reason, and a bearer in ``short_of`` gets 403
``insufficient_scope`` naming the scope it lacks; a bearer in ``renewable`` gets 401 with
``data.reason`` (``token_expired``, ``key_revoked``...) and ``data.fix``, as the gateway
answers a built-in token that a new ``vera connect`` renews.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY = "vera_test_api_key_typed_by_the_user"
# The first per-connection key connect makes (POST /identity/api-keys) and keeps; each
# later one gets a numbered key and id of its own.
CONNECTION_KEY, CONNECTION_KEY_ID = "vera_test_connection_key", "key-connection"
TOOLS = [
    {"name": "knowledge_bootstrap", "description": "bootstrap",
     "inputSchema": {"type": "object", "properties": {}}, "annotations": {"readOnlyHint": True}},
    {"name": "knowledge_propose", "description": "propose",
     "inputSchema": {"type": "object", "properties": {}}, "annotations": {"readOnlyHint": False}},
]


class StandIn:
    def __init__(self, auth: str | None = None, oauth_issuer: str | None = None, *,
                 minted: str | None = None, short_of: dict[str, str] | None = None,
                 renewable: dict[str, str] | None = None) -> None:
        self.auth, self.oauth_issuer = auth, oauth_issuer
        self.minted, self.short_of = minted or auth, short_of or {}
        self.renewable = renewable or {}
        self.revoked: set[str] = set()
        self.issued: dict[str, str] = {}  # key id -> per-connection key
        self.requests: list[dict] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            # Persistent connections, as the real gateway keeps them: over HTTP/1.0 each
            # answer closed its socket, and OpenCode's client now and then sent its next
            # request down a pooled socket the stand-in had just closed ("Failed to get
            # tools" in about one `opencode mcp list` of ten).
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: object | None = None,
                      challenge: str | None = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                if challenge:
                    self.send_header("WWW-Authenticate", challenge)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                standin.requests.append({"method": "GET", "path": self.path,
                                         "headers": dict(self.headers)})
                if self.path in ("/livez", "/readyz"):
                    return self._send(200, {"status": "ok"})
                if self.path == "/.well-known/oauth-protected-resource":
                    servers = [standin.oauth_issuer] if standin.oauth_issuer else []
                    return self._send(200, {"resource": "https://mcp.test",
                                            "authorization_servers": servers})
                return self._send(405)

            def do_DELETE(self) -> None:
                standin.requests.append({"method": "DELETE", "path": self.path,
                                         "headers": dict(self.headers)})
                key = standin.issued.get(self.path.removeprefix("/identity/api-keys/"))
                if key and self.headers.get("Authorization") == f"Bearer {key}":
                    standin.revoked.add(key)
                    return self._send(200, {"revoked": True})
                return self._send(401, {"error": "unauthenticated"})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                msg = json.loads(raw or b"null")
                standin.requests.append({"method": "POST", "path": self.path,
                                         "headers": dict(self.headers), "body": msg})
                bearer = self.headers.get("Authorization", "")
                keys = {API_KEY, *(set(standin.issued.values()) - standin.revoked)}
                if self.path == "/identity/api-keys":
                    if bearer.removeprefix("Bearer ") not in keys:
                        return self._send(401, {"error": "unauthenticated"})
                    n = len(standin.issued)
                    key_id, key = ((CONNECTION_KEY_ID, CONNECTION_KEY) if not n else
                                   (f"{CONNECTION_KEY_ID}-{n}", f"{CONNECTION_KEY}_{n}"))
                    standin.issued[key_id] = key
                    return self._send(201, {"api_key": key, "key_id": key_id})
                if self.path == "/identity/mcp-token":
                    if bearer.removeprefix("Bearer ") not in keys:
                        return self._send(401, {"error": "unauthenticated"})
                    return self._send(200, {"access_token": standin.minted,
                                            "token_type": "Bearer"})
                if self.path != "/mcp":
                    return self._send(404)
                metadata = f'resource_metadata="{standin.url}/.well-known/oauth-protected-resource"'
                short = standin.short_of.get(bearer.removeprefix("Bearer "))
                if standin.auth and short:
                    return self._send(403, {"jsonrpc": "2.0", "id": None, "error": {
                        "code": -32002, "message": "scope",
                        "data": {"code": "unauthorized", "required_scope": short}}},
                        f'Bearer {metadata}, error="insufficient_scope", scope="{short}"')
                if standin.auth and bearer != f"Bearer {standin.auth}":
                    reason = standin.renewable.get(bearer.removeprefix("Bearer "))
                    renew = {"reason": reason, "fix": "vera connect"} if reason else {}
                    return self._send(401, {"jsonrpc": "2.0", "id": None, "error": {
                        "code": -32001, "message": "no credential",
                        "data": {"code": "unauthenticated", **renew}}},
                        f"Bearer {metadata}" + (', error="invalid_token"' if bearer else ""))
                if not isinstance(msg, dict) or "id" not in msg:
                    return self._send(202)
                method = msg.get("method")
                results = {
                    "initialize": {"protocolVersion": (msg.get("params") or {}).get(
                        "protocolVersion", "2025-11-25"),
                        "capabilities": {"tools": {"listChanged": False}},
                        "serverInfo": {"name": "vera-standin", "version": "0"}},
                    "tools/list": {"tools": TOOLS}, "ping": {}}
                if method in results:
                    return self._send(200, {"jsonrpc": "2.0", "id": msg["id"],
                                            "result": results[method]})
                return self._send(200, {"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32601, "message": "method not found"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
