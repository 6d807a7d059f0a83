"""The HTTP surface around the MCP endpoint: transport security, GET, health, metrics."""

from __future__ import annotations

import re

import httpx
from harness import local_token, mcp_client

from vera.gateway.coding_tools import CODING_TOOL_NAMES

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
JSON_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                "authorization": f"Bearer {local_token()}"}


async def test_disallowed_host_is_421_and_origin_403(gateway):
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.post(
            gateway.url, json=INIT, headers={**JSON_HEADERS, "host": "evil.example"}
        )
        assert response.status_code == 421
        # It names the setting that admits a hostname (a reverse proxy in front).
        data = response.json()["error"]["data"]
        assert (data["code"], data["field"], data["setting"]) == (
            "invalid_input", "host", "VERA_MCP__ALLOWED_HOSTS")
        assert "VERA_MCP__ALLOWED_HOSTS" in response.json()["error"]["message"]
        response = await http.post(
            gateway.url, json=INIT, headers={**JSON_HEADERS, "origin": "http://evil.example"}
        )
        assert response.status_code == 403
        # The modern (2026-07-28) path applies the same checks.
        response = await http.post(
            gateway.url,
            json=INIT,
            headers={**JSON_HEADERS, "host": "evil.example", "mcp-protocol-version": "2026-07-28"},
        )
        assert response.status_code == 421
        response = await http.get(gateway.url, headers={"host": "evil.example"})
        assert response.status_code == 421


async def test_a_deeply_nested_body_is_a_parse_error_not_a_crash(gateway):
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.post(gateway.url, content=b"[" * 200_000, headers=JSON_HEADERS)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32700
        assert (await http.post(gateway.url, json=INIT, headers=JSON_HEADERS)).status_code == 200


async def test_allowed_origin_is_accepted(start_gateway):
    async with start_gateway(allowed_origins=["http://localhost:3000"]) as gw:
        async with httpx.AsyncClient(timeout=5) as http:
            response = await http.post(
                gw.url, json=INIT, headers={**JSON_HEADERS, "origin": "http://localhost:3000"}
            )
            assert response.status_code == 200
            assert response.json()["result"]["serverInfo"]["name"] == "vera"


async def test_get_mcp_is_405_not_a_hanging_stream(gateway):
    async with httpx.AsyncClient(timeout=5) as http:
        for headers in (
            {"accept": "text/event-stream"},
            {"accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"},
            {"accept": "text/event-stream", "mcp-protocol-version": "2026-07-28"},
        ):
            response = await http.get(gateway.url, headers=headers)
            assert response.status_code == 405
            assert response.headers["allow"] == "POST"
        response = await http.delete(gateway.url)
        assert response.status_code == 405


async def test_healthz_is_liveness(gateway):
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(f"{gateway.base}/healthz")
        assert response.status_code == 200 and response.json() == {"status": "ok"}
        # Probes dial the pod address: liveness does not depend on the Host allowlist.
        response = await http.get(f"{gateway.base}/healthz", headers={"host": "10.0.0.7:8080"})
        assert response.status_code == 200


async def test_metrics_live_on_their_own_listener_with_bounded_labels(gateway, call_error):
    async with mcp_client(gateway.url) as client:
        await client.call_tool("knowledge_search", {"query": "zebra-query-text"})
        await call_error(client, "knowledge_search", {"query": ""})
        await call_error(client, "knowledge_made_up_tool", {"query": "q"})
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.get(f"{gateway.base}/metrics")).status_code == 404
        assert gateway.metrics_url is not None
        assert not gateway.metrics_url.startswith(gateway.base)
        text = (await http.get(gateway.metrics_url)).text
    samples = re.findall(r"^(vera_mcp_tool_\w+)\{([^}]*)\} (\S+)$", text, re.MULTILINE)
    assert samples
    seen_tools = set()
    for name, labels, _ in samples:
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        keys = set(pairs) - {"le"} if name.endswith("_bucket") else set(pairs)
        assert keys == {"tool", "outcome"}, (name, labels)
        assert pairs["outcome"] in {"success", "error"}
        seen_tools.add(pairs["tool"])
    assert seen_tools == set(CODING_TOOL_NAMES)
    assert "knowledge_made_up_tool" not in text and "zebra-query-text" not in text
    assert "00000000-0000-4000-8000-00000000cafe" not in text

    def count(outcome: str) -> float:
        prefix = re.escape(
            f'vera_mcp_tool_calls_total{{outcome="{outcome}",tool="knowledge_search"}}'
        )
        match = re.search(prefix + r" (\S+)$", text, re.MULTILINE)
        assert match, outcome
        return float(match.group(1))

    assert count("success") >= 1 and count("error") >= 1
    assert "vera_mcp_tool_duration_seconds_bucket" in text
