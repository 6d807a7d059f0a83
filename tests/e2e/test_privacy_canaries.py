"""Privacy canaries: a scenario through the real authenticated stack with marker strings in
every caller-supplied field (credentials, queries, evidence, repository URLs with a password,
session and task refs), then every stack log line, every metrics sample, every error the
stack returned and every span each process exported over OTLP to a loopback receiver (which
also shows one MCP call as one trace across the processes) is scanned for them. Only the
caller's own data in a successful result may echo a marker; credentials may not appear
anywhere."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from harness import ExportedSpan, OtlpReceiver
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from vera.stack.launcher import LaunchedStack, launch, launch_env

pytestmark = pytest.mark.e2e

ALL_SCOPES = ["memory:read", "memory:propose", "memory:feedback", "memory:snapshot"]
RUN = secrets.token_hex(6)
# One marker per kind of caller data, so a leak names what leaked.
MARKERS = {
    kind: f"canary{kind}{RUN}"
    for kind in ("name", "query", "subject", "object", "evidence", "session", "task",
                 "repopassword", "bogustoken", "packid", "resultref", "asof")
}
REPOSITORY = f"https://user:{MARKERS['repopassword']}@github.com/acme/x"


@dataclass
class Scenario:
    stack: LaunchedStack
    # Values the stack issued to the caller: never in a log line or a metric either.
    secrets: dict[str, str] = field(default_factory=dict)
    errors: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)

    def everything_secret(self) -> dict[str, str]:
        return {**MARKERS, **self.secrets}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture(scope="module")
def privacy_stack(
    tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver
) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("privacy-stack") / "data"
    env = launch_env(
        data_dir,
        **receiver.env(),
        VERA_API__OPEN_REGISTRATION="true",
        VERA_MCP__JWT_SECRET="privacy-canary-mcp-signing-secret-0123456789",
        VERA_MCP__AUTH_ISSUER="https://auth.vera.privacy",
        VERA_MCP__AUTH_AUDIENCE="https://mcp.vera.privacy",
        VERA_OBSERVABILITY__LOG_LEVEL="DEBUG",
    )
    with launch(data_dir, env) as running:
        yield running


def api_url(stack: LaunchedStack) -> str:
    return json.loads((stack.data_dir / "run" / "stack.json").read_text())["api_url"]


def mcp_client(stack: LaunchedStack, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(stack.mcp_url, http_client=http))


async def run_scenario(scenario: Scenario) -> None:
    stack = scenario.stack
    async with httpx.AsyncClient(base_url=api_url(stack)) as http:
        account = (await http.post("/identity/register",
                                   json={"display_name": MARKERS["name"]})).json()
        api_key = account["api_key"]
        issued = await http.post("/identity/mcp-token", json={"scopes": ALL_SCOPES},
                                 headers={"authorization": f"Bearer {api_key}"})
        read_only = await http.post("/identity/mcp-token",
                                    headers={"authorization": f"Bearer {api_key}"})
        refused = await http.get("/identity/me",
                                 headers={"authorization": f"Bearer {MARKERS['bogustoken']}"})
    assert refused.status_code == 401
    scenario.errors.append({"rest": refused.text})
    token = issued.json()["access_token"]
    scenario.secrets.update(api_key=api_key, token=token,
                            read_only_token=read_only.json()["access_token"],
                            principal_id=account["principal_id"])

    async def ok(client: Client, tool: str, **arguments) -> dict:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        scenario.results.append(result.structured_content)
        return result.structured_content

    async def fails(client: Client, tool: str, **arguments) -> None:
        with pytest.raises(MCPError) as caught:
            await client.call_tool(tool, arguments)
        scenario.errors.append({"tool": tool, "code": caught.value.code,
                                "message": caught.value.error.message,
                                "data": caught.value.data})

    query = f"which database does {MARKERS['query']} use?"
    context_fields = {"session_ref": MARKERS["session"], "task_ref": MARKERS["task"],
                      "repository_ref": REPOSITORY, "runtime": "claude-code"}
    async with mcp_client(stack, token) as client:
        await ok(client, "knowledge_bootstrap", repository=REPOSITORY, branch="main")
        await ok(client, "knowledge_search", query=query)
        await ok(client, "knowledge_propose", subject=MARKERS["subject"], predicate="uses",
                 object=MARKERS["object"], evidence_text=MARKERS["evidence"], **context_fields)
        await ok(client, "knowledge_proposal_report", **context_fields)
        pack = await ok(client, "knowledge_get_context", query=query, persist=True)
        await fails(client, "knowledge_get_context", query=query, limit=51)
        await fails(client, "knowledge_search", query=query, as_of=MARKERS["asof"])
        await fails(client, "knowledge_get_context_pack", pack_id=MARKERS["packid"])
        await fails(client, "knowledge_feedback", context_pack_id=pack["pack_id"],
                    result_ref=MARKERS["resultref"], signal="up")
        await fails(client, "knowledge_propose", subject=MARKERS["subject"],
                    predicate="uses", object=MARKERS["object"],
                    evidence_text=MARKERS["evidence"] * 1000, **context_fields)
    async with mcp_client(stack, scenario.secrets["read_only_token"]) as client:
        await fails(client, "knowledge_propose", subject=MARKERS["subject"], predicate="uses",
                    object=MARKERS["object"], **context_fields)
    async with httpx.AsyncClient() as http:
        refused = await http.post(stack.mcp_url, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": MARKERS["name"], "version": "0"}}},
            headers={"accept": "application/json, text/event-stream",
                     "authorization": f"Bearer {MARKERS['bogustoken']}"})
    assert refused.status_code == 401
    scenario.errors.append({"mcp": refused.text, "headers": dict(refused.headers)})


@pytest.fixture(scope="module")
def scenario(privacy_stack: LaunchedStack) -> Scenario:
    ran = Scenario(privacy_stack)
    asyncio.run(run_scenario(ran))
    return ran


def leaks(text: str, secret_values: dict[str, str]) -> list[str]:
    lowered = text.lower()
    return sorted(kind for kind, value in secret_values.items() if value.lower() in lowered)


def test_the_markers_reached_the_stack(scenario):
    # The scans below only mean something if the stack saw the markers: the caller's own
    # proposal comes back, and every bad call came back as a structured error.
    returned = json.dumps(scenario.results)
    assert MARKERS["subject"] in returned and MARKERS["task"] in returned
    codes = [error["data"]["code"] for error in scenario.errors if "data" in error]
    assert "invalid_input" in codes and "unauthorized" in codes
    assert len(codes) == 6, scenario.errors
    assert " DEBUG " in scenario.stack.log_path.read_text(errors="replace")


def test_stack_logs_carry_no_canary(scenario):
    log = scenario.stack.log_path.read_text(errors="replace")
    leaked = {kind: [line for line in log.splitlines()
                     if scenario.everything_secret()[kind].lower() in line.lower()][:3]
              for kind in leaks(log, scenario.everything_secret())}
    assert leaked == {}


def test_metrics_carry_no_canary(scenario):
    port = scenario.stack.env["VERA_OBSERVABILITY__MCP_METRICS_PORT"]
    body = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    assert "vera_mcp_tool_calls_total" in body
    assert leaks(body, scenario.everything_secret()) == []


def test_error_messages_carry_no_canary(scenario):
    leaked = {json.dumps(error): leaks(json.dumps(error), scenario.everything_secret())
              for error in scenario.errors}
    assert {error: kinds for error, kinds in leaked.items() if kinds} == {}


def test_results_never_return_credentials(scenario):
    credentials = {kind: scenario.everything_secret()[kind]
                   for kind in ("repopassword", "bogustoken", "api_key", "token",
                                "read_only_token")}
    assert leaks(json.dumps(scenario.results), credentials) == []



# --- traces -------------------------------------------------------------------------------

# The caller's own trace: the MCP call continues it (params._meta.traceparent).
CALLER_TRACE = secrets.token_hex(16)
CALLER_SPAN = secrets.token_hex(8)
TRACED = ("vera-gateway", "vera-retrieval", "vera-knowledge")


@pytest.fixture(scope="module")
def trace(scenario: Scenario, receiver: OtlpReceiver) -> list[ExportedSpan]:
    """The spans of one knowledge_get_context whose caller sent a traceparent, once every
    process named in TRACED exported its part (the scenario's spans arrive meanwhile)."""

    async def call() -> None:
        async with mcp_client(scenario.stack, scenario.secrets["token"]) as client:
            result = await client.call_tool(
                "knowledge_get_context", {"query": f"who owns {MARKERS['query']}?"},
                meta={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
            assert not result.is_error, result.content

    asyncio.run(call())
    deadline = time.monotonic() + 60
    while True:
        spans = [s for s in receiver.spans() if s.trace_id == CALLER_TRACE]
        # The MCP span ends (and is exported) last.
        complete = {s.service for s in spans} >= set(TRACED) and any(
            s.parent_id == CALLER_SPAN for s in spans)
        if complete or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_one_tool_call_is_one_trace_through_the_gateway_and_the_services(trace):
    assert {s.service for s in trace} >= set(TRACED)
    by_id = {s.span_id: s for s in trace}
    [mcp] = [s for s in trace if s.name == "tools/call knowledge_get_context"]
    assert mcp.service == "vera-gateway" and mcp.parent_id == CALLER_SPAN
    assert mcp.attributes["mcp.method.name"] == "tools/call"
    assert mcp.attributes["gen_ai.tool.name"] == "knowledge_get_context"
    # Every other span descends from the MCP span: one tree, not spans that share an id.
    for span in trace:
        ancestor = span
        while ancestor.parent_id in by_id:
            ancestor = by_id[ancestor.parent_id]
        assert ancestor is mcp, span
    servers = {(s.service, s.attributes.get("rpc.service")) for s in trace if s.kind == 2}
    assert ("vera-retrieval", "vera.retrieval.v1.RetrievalService") in servers
    assert ("vera-knowledge", "vera.knowledge.v1.KnowledgeService") in servers
    stages = {s.attributes["vera.retrieval.stage"]: s for s in trace
              if "vera.retrieval.stage" in s.attributes}
    assert {"dense", "lexical", "order"} <= set(stages)
    assert all(isinstance(s.attributes.get("vera.retrieval.candidates",
                                           s.attributes.get("vera.retrieval.results")), int)
               for s in stages.values())
    statements = [s for s in trace if s.attributes.get("db.system") == "postgresql"]
    assert {s.service for s in statements} >= {"vera-knowledge"}


def test_probes_start_no_trace(trace, receiver):
    names = {s.name for s in receiver.spans()}
    assert not any("Health" in name or "healthz" in name or "readyz" in name
                   for name in names), names


def test_traces_carry_no_canary(scenario, receiver, trace):
    """Every byte every process exported: span names, attributes, events, resources."""
    assert trace  # the scan below covers the scenario's calls and a traced one
    exported = b"".join(receiver.bodies).decode("latin-1")
    assert leaks(exported, scenario.everything_secret()) == []


def test_every_error_carries_the_trace_id_its_log_line_carries(scenario):
    """Tracing on: each structured error names its trace, and a log line of the process
    that answered it carries the same id."""
    log = scenario.stack.log_path.read_text(errors="replace")
    ids = []
    for error in scenario.errors:
        if "data" in error:
            ids.append(error["data"]["trace_id"])
        elif "rest" in error:
            ids.append(json.loads(error["rest"])["error"]["trace_id"])
        else:
            ids.append(json.loads(error["mcp"])["error"]["data"]["trace_id"])
    assert len(set(ids)) == len(ids) == len(scenario.errors)
    for trace_id in ids:
        assert f" trace_id={trace_id}" in log, trace_id
