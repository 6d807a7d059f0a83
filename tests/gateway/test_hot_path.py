"""The per-call shortcuts on the tools/call path answer exactly as the long way did:
cached timestamp and enum texts, the Mcp-Param schema lookup, pre-bound metric series;
and a call writes no log line of its own."""

from __future__ import annotations

import logging

import httpx
import mcp_types as types
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from harness import local_token, mcp_client

from vera.errors import InvalidInput
from vera.gateway import views
from vera.gateway.app import mcp_param_schemas
from vera.gateway.metrics import ToolMetrics
from vera.gateway.profiles import PROFILES, tools_for_profile
from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
from vera.logs import configure_logging
from vera.rpc.timestamps import from_timestamp


@pytest.mark.parametrize(
    ("seconds", "nanos"),
    [
        (0, 0),
        (1_683_554_160, 0),
        (1_683_554_160, 123_456_000),
        (1_683_554_160, 999_999_999),  # sub-microsecond digits are dropped, not rounded
        (-86_400, 500_000_000),
        (253_402_300_799, 999_999_999),  # 9999-12-31T23:59:59.999999
    ],
)
def test_timestamp_text_is_the_datetime_isoformat(seconds, nanos):
    fact = knowledge_pb2.Fact()
    fact.recorded_at.CopyFrom(Timestamp(seconds=seconds, nanos=nanos))
    for _ in range(2):  # computed, then cached
        assert views.ts(fact, "recorded_at") == views.iso(from_timestamp(fact, "recorded_at"))
    assert views.ts(fact, "recorded_at").endswith("Z")


def test_unset_timestamp_is_none_and_an_invalid_one_still_raises():
    fact = knowledge_pb2.Fact()
    assert views.ts(fact, "valid_to") is None
    fact.valid_to.CopyFrom(Timestamp(seconds=253_402_300_800))  # past 9999-12-31
    with pytest.raises(InvalidInput):  # the one converter: invalid_input naming the field
        from_timestamp(fact, "valid_to")
    with pytest.raises(ValueError):
        views.ts(fact, "valid_to")


def test_enum_names_and_unknown_values():
    assert views.state(knowledge_pb2.FACT_STATE_ACTIVE) == "active"
    assert views.state(knowledge_pb2.FACT_STATE_ACTIVE) == "active"
    assert views.verification(knowledge_pb2.VERIFICATION_STATE_VERIFIED) == "verified"
    with pytest.raises(ValueError):
        views.state(999)


def _tool(input_schema: dict) -> types.Tool:
    return types.Tool(name="t", input_schema=input_schema)


def test_only_schemas_that_declare_mcp_param_headers_are_handed_to_the_sdk():
    for profile in PROFILES:
        definitions = [spec.definition() for spec in tools_for_profile(profile)]
        assert mcp_param_schemas(definitions) == {}
    declared = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    }
    assert mcp_param_schemas([_tool(declared)]) == {"t": declared}
    # A mark the SDK rejects (not on a string/integer/boolean) makes it check nothing.
    invalid = {
        "type": "object",
        "properties": {"tags": {"type": "array", "x-mcp-header": "Tags"}},
    }
    assert mcp_param_schemas([_tool(invalid)]) == {}


async def test_a_stray_mcp_param_header_is_ignored_on_the_2026_path(gateway):
    version = "2026-07-28"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "knowledge_search",
            "arguments": {"query": "q"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": version,
        "mcp-method": "tools/call",
        "mcp-name": "knowledge_search",
        "mcp-param-query": "something else",
        "authorization": f"Bearer {local_token()}",
    }
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.post(gateway.url, json=body, headers=headers)
    assert response.status_code == 200
    result = response.json()["result"]
    assert not result["isError"] and result["structuredContent"]["results"]


def test_an_observed_call_counts_once_in_its_own_series():
    metrics = ToolMetrics(["knowledge_search", "knowledge_get_context"])
    metrics.observe("knowledge_search", "success", 0.25)

    def value(name: str, tool: str, outcome: str) -> float:
        return metrics.registry.get_sample_value(name, {"tool": tool, "outcome": outcome})

    assert value("vera_mcp_tool_calls_total", "knowledge_search", "success") == 1
    assert value("vera_mcp_tool_duration_seconds_sum", "knowledge_search", "success") == 0.25
    assert value("vera_mcp_tool_calls_total", "knowledge_search", "error") == 0
    assert value("vera_mcp_tool_calls_total", "knowledge_get_context", "success") == 0


@pytest.fixture
def process_logging(caplog):
    """Logging as a gateway process configures it (INFO), still captured by caplog."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", "gateway")  # replaces the root handlers, caplog's too
    root.addHandler(caplog.handler)
    caplog.handler.setLevel(logging.INFO)
    yield caplog
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_a_successful_call_logs_nothing_in_either_era(gateway, process_logging):
    caplog = process_logging
    for mode in ("legacy", "auto"):
        async with mcp_client(gateway.url, mode=mode) as client:
            await client.call_tool("knowledge_search", {"query": "q"})
            caplog.clear()
            await client.call_tool("knowledge_search", {"query": "q"})
        assert [r.getMessage() for r in caplog.records if r.name.startswith("mcp.")] == []
