"""The metrics listener answers a scrape of the pod's address (Host an IP literal, as
Prometheus sends) and refuses a name (a DNS-rebinding page) with 421."""

from __future__ import annotations

import httpx

from vera.gateway.metrics import ToolMetrics
from vera.observability.metrics_listener import start_listener


async def test_the_metrics_listener_answers_addresses_and_refuses_names() -> None:
    listener = start_listener(ToolMetrics(["knowledge_search"]).registry, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.port}/metrics"
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            for host in (f"127.0.0.1:{listener.port}", "10.0.0.7:9101", "[fd00::7]:9101",
                         "localhost"):
                scraped = await http.get(url, headers={"host": host})
                assert scraped.status_code == 200, host
                assert "vera_mcp_tool_calls" in scraped.text
            for host in ("attacker.example", f"attacker.example:{listener.port}",
                         "10.0.0.7.nip.io:9101", ""):
                refused = await http.get(url, headers={"host": host})
                assert refused.status_code == 421, host
                assert "vera_mcp_tool" not in refused.text
    finally:
        await listener.stop()
