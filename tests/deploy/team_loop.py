"""The team loop, run against a deployment started as processes (the rendered chart, or
compose.yaml): users, API keys, an MCP token, a shared project, a proposal over MCP, the
curator's verification over REST, the verified fact served to the agent with citations.

Every deployment test reaches VERA through a :class:`Front` (where its API and gateway
answer, and the Host each expects); the first administrator is made by the caller, with
the command its own documentation prints.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from team import PROJECT, bearer, ingested_fact_cited, shared_project

OBJECT = "the blue cluster in eu-west"
ALL_SCOPES = ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"]


@dataclass(frozen=True)
class Front:
    """How a client reaches one running deployment."""

    api_url: str
    mcp_url: str  # the gateway's base URL (``/mcp`` is appended)
    api_host: str | None = None  # the Host header each expects (an Ingress host, ...)
    mcp_host: str | None = None


@dataclass(frozen=True)
class LoopResult:
    dev_key: str
    verified_fact_key: str


def api_client(front: Front) -> httpx.AsyncClient:
    headers = {"host": front.api_host} if front.api_host else {}
    return httpx.AsyncClient(base_url=front.api_url, headers=headers, timeout=30)


def mcp_client(front: Front, token: str) -> Client:
    headers = {"authorization": f"Bearer {token}"}
    if front.mcp_host:
        headers["host"] = front.mcp_host
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(front.mcp_url + "/mcp", http_client=http))


def field(output: str, name: str) -> str:
    """One ``name: value`` line of a command's output (``vera admin create-user``)."""
    fields = dict(line.split(":", 1) for line in output.splitlines() if ":" in line)
    return fields[name].strip()


async def team_loop(front: Front, admin_key: str, *, connections: int = 1) -> LoopResult:
    """The loop; ``connections`` fresh MCP connections must each be served the verified
    fact (more than one where a Service spreads them over replicas)."""
    async with api_client(front) as api:
        assert (await api.get("/readyz")).status_code == 200
        curator = await user(api, admin_key, "curator")
        dev = await user(api, admin_key, "dev")
        # A second API key of the dev's own, exchanged for an MCP token.
        dev_key = (await api.post("/identity/api-keys", json={"label": "laptop"},
                                  headers=bearer(dev["api_key"]))).json()["api_key"]
        token = await api.post("/identity/mcp-token", json={"scopes": ALL_SCOPES},
                               headers=bearer(dev_key))
        assert token.status_code == 200, token.text
        access_token = token.json()["access_token"]
        project = await shared_project(api, curator, dev, PROJECT)

        async with mcp_client(front, access_token) as client:
            boot = await client.call_tool("knowledge_bootstrap", {})
            assert not boot.is_error, boot.content
            assert boot.structured_content["auth_profile"] == "remote-authenticated"
            await ingested_fact_cited(client, project["seed_fact_key"])
            proposed = await client.call_tool("knowledge_propose", {
                "subject": "payments-api", "predicate": "deploys_to",
                "object": OBJECT, "task_ref": "t-1", "project": PROJECT})  # fmt: skip
            assert not proposed.is_error, proposed.content
            fact_key = proposed.structured_content["fact"]["fact_key"]

        verified = await api.post(
            f"/curation/projects/{project['project_id']}/proposals/{fact_key}/verify",
            headers=bearer(curator["api_key"]), json={})
        assert verified.status_code == 200, verified.text

    served_keys = set()
    for _ in range(connections):
        async with mcp_client(front, access_token) as fresh:
            served = await verified_fact_served(fresh, OBJECT)
        assert served["citations"] and all(
            c["verification"] == "verified" for c in served["citations"]), served
        served_keys.add(served["fact_key"])
    [verified_fact_key] = served_keys
    return LoopResult(dev_key=dev_key, verified_fact_key=verified_fact_key)


async def user(api: httpx.AsyncClient, admin_key: str, name: str) -> dict:
    made = await api.post("/identity/users", json={"display_name": name},
                          headers=bearer(admin_key))
    assert made.status_code == 201, made.text
    return made.json()


async def verified_fact_served(client: Client, wanted: str, timeout: float = 60.0) -> dict:
    """The result carrying ``wanted`` once the replica serving ``client`` has indexed the
    verification (a follower trails the writer by a poll)."""
    give_up = time.monotonic() + timeout
    while True:
        context = await client.call_tool("knowledge_get_context", {
            "query": "where does payments-api deploy to", "project": PROJECT})
        assert not context.is_error, context.content
        found = [r for r in context.structured_content["results"] if r["object"] == wanted]
        if found and found[0]["citations"] and found[0]["citations"][0][
                "verification"] == "verified":
            return found[0]
        assert time.monotonic() < give_up, context.structured_content
        await asyncio.sleep(1.0)
