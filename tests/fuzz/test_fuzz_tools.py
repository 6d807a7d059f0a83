"""Every tool of every profile, fuzzed from its own published input schema through the
official MCP client against the real stack (`vera up`: four services on embedded
PostgreSQL behind the gateway).

Per tool, Hypothesis draws from three pools: arguments the schema accepts
(``hypothesis-jsonschema``), those same arguments with one value swapped for an edge value
(each bound and one past it, NUL and other control characters, bidi/zero-width/TAG
characters, huge integers, integral and non-finite floats, instants at year 1 and 9999 and
past them, deep nesting, values of the wrong JSON type, an unknown argument), and ids that
name something real, so calls get past their look-ups. Values no client library will
encode (lone surrogates, NaN and Infinity, integers past every float, nesting past the
parser's limit) go as raw JSON bodies. Every call must end in a result or a structured
error: never ``internal_error``, never an ``isError`` result (an exception that escaped
the guard), never an HTTP 5xx, an invalid_input always names its field; and after each
tool's batch the stack still serves (every process alive, every service healthy,
``tools/list`` whole) and no process logged an unexpected failure.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import httpx
import pytest
from fuzz_stack import (
    Session,
    failures_logged_since,
    fuzz_settings,
    log_offset,
    mcp_session,
    serving,
)
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from mcp import MCPError

from vera.gateway.errors import ERROR_CODES
from vera.gateway.profiles import PROFILES, tools_for_profile
from vera.stack.launcher import LaunchedStack

pytestmark = pytest.mark.e2e

INTERNAL_ERROR = ERROR_CODES["internal_error"][0]
INVALID_INPUT = ERROR_CODES["invalid_input"][0]
# The widest profile serves every tool of the others (their schemas are the same: below).
WIDEST = "compatibility"
TOOLS = [spec.name for spec in tools_for_profile(WIDEST)]
PROJECT = "fuzz"
REPOSITORY = "https://github.com/acme/fuzz"
TIME_ARGUMENTS = {"as_of", "known_as_of"}

CONTROL = ["\x00", "a\x00b", "\x01\x02\x1b[31m\x7f", "\r\n\t", "\x85\u2028\u2029"]
HIDDEN = ["\u202e\u2066evil\u2069", "\u200b\u200d\ufeff", "\U000e0041\U000e007f", "\ufff9\ufffb"]
INSTANTS = [
    "0001-01-01T00:00:00Z",
    "0001-01-01",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "2025-02-30T00:00:00Z",
    "2025-01-01T25:00:00Z",
    "  2025-01-01T00:00:00Z  ",
    "2025-01-01T00:00:00+23:59",
    "-2025-01-01",
    "now",
]
HUGE = [2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**40, -(10**40)]
FLOATS = [1e308, -1e308, 5e-324, -0.0, 0.5, 2.0, 1.0000000000000002]


def nested(depth: int) -> Any:
    value: Any = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
ANY_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def string_edges(name: str, schema: dict[str, Any]) -> list[Any]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    edges: list[Any] = ["", " ", "x" * max(low - 1, 0), "x" * max(low, 1)]
    if high is not None:
        edges += ["x" * high, "x" * (high + 1), "\U0001f600" * high, "\U0001f600" * (high + 1)]
    edges += CONTROL + HIDDEN
    if name in TIME_ARGUMENTS:
        edges += INSTANTS
    return edges


def number_edges(schema: dict[str, Any]) -> list[Any]:
    edges: list[Any] = [*HUGE, *FLOATS, 0, -1, True, "1"]
    integer = schema["type"] == "integer"
    for key, step in (("minimum", -1), ("maximum", 1)):
        if key in schema:
            bound = schema[key]
            past = bound + step if integer else math.nextafter(bound, step * math.inf)
            edges += [bound, past, float(bound)]
    return edges


def array_edges(schema: dict[str, Any]) -> list[Any]:
    most = schema.get("maxItems", 8)
    item = "p" if schema["items"].get("type") == "string" else {"repository": REPOSITORY}
    return [
        [],
        [item] * most,
        [item] * (most + 1),
        [None],
        [1],
        [[item]],
        [""],
        [{}],
        [{"repository": REPOSITORY, "extra": 1}],
        nested(60),
    ]


def edge_values(name: str, schema: dict[str, Any]) -> list[Any]:
    """Values at and past what ``schema`` allows, of the wrong type, and deeply nested."""
    kind = schema.get("type")
    if "enum" in schema:
        own = [schema["enum"][0].upper(), schema["enum"][0] + "\x00", ""]
    elif kind == "string":
        own = string_edges(name, schema)
    elif kind in ("integer", "number"):
        own = number_edges(schema)
    elif kind == "array":
        own = array_edges(schema)
    else:
        own = ["true", 0, 1]
    return [*own, None, {}, [], nested(150)]


def arguments_strategy(schema: dict[str, Any], known: dict[str, Any]) -> st.SearchStrategy:
    properties: dict[str, Any] = schema["properties"]
    valid = from_schema(schema)
    names = sorted(properties)

    def hostile_value(name: str) -> st.SearchStrategy:
        pool = st.sampled_from(edge_values(name, properties[name])) | ANY_JSON
        if name in known:
            pool = pool | st.sampled_from(known[name])
        return pool

    def swapped(arguments: dict[str, Any]) -> st.SearchStrategy:
        return st.sampled_from(names).flatmap(
            lambda name: hostile_value(name).map(lambda value: {**arguments, name: value})
        )

    def with_known(arguments: dict[str, Any]) -> st.SearchStrategy:
        present = [name for name in names if name in known]
        if not present:
            return st.just(arguments)
        return st.fixed_dictionaries({name: st.sampled_from(known[name]) for name in present}).map(
            lambda ids: {**arguments, **ids}
        )

    extra = valid.flatmap(
        lambda arguments: st.text(min_size=1, max_size=12).map(
            lambda key: {**arguments, f"{key}_": "x"}
        )
    )
    return st.one_of(valid, valid.flatmap(with_known), valid.flatmap(swapped), extra)


def judged(session: Session, tool: str, arguments: dict[str, Any]) -> str | None:
    """Why this call broke the error contract, or None."""
    try:
        result = session.call_tool(tool, arguments)
    except MCPError as error:
        data = error.error.data if isinstance(error.error.data, dict) else {}
        if error.error.code == INTERNAL_ERROR or data.get("code") == "internal_error":
            return f"internal_error for {arguments!r}"
        if data.get("code") == "invalid_input" and not data.get("field"):
            return f"invalid_input naming no field for {arguments!r}: {data}"
        return None
    if result.is_error:
        return f"isError result for {arguments!r}: {result.content}"
    return None


def seed(stack: LaunchedStack, tmp: Any) -> dict[str, list[Any]]:
    """Shared truth through the curator's path (`vera ingest`) plus the caller's own
    proposal, a persisted pack and a snapshot: values that name something, per argument."""
    lines = [
        {
            "type": "source",
            "id": "adr-1",
            "source_type": "adr",
            "title": "ADR 1",
            "uri": "https://wiki/adr/1",
            "observed_at": "2025-01-02T00:00:00Z",
        },
        {
            "type": "fact",
            "subject": "payments-api",
            "predicate": "uses_database",
            "object": "PostgreSQL 16",
            "source": "adr-1",
            "evidence": "we chose postgres",
            "repository": REPOSITORY,
            "branch": "main",
            "code_path": "services/payments",
            "document_type": "adr",
        },
        {
            "type": "fact",
            "subject": "payments-api",
            "predicate": "owned_by",
            "object": "team-payments",
            "source": "adr-1",
        },
        {"type": "entity", "name": "payments-api", "aliases": ["payments"], "kind": "service"},
    ]
    path = tmp / "seed.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ingested = stack.vera("ingest", str(path), "--project", PROJECT)
    assert ingested.returncode == 0, ingested.stdout + ingested.stderr
    with mcp_session(stack) as session:
        proposed = session.call_tool(
            "knowledge_propose", {"subject": "fuzz-seed", "predicate": "uses", "object": "redis"}
        ).structured_content
        pack = session.call_tool(
            "knowledge_get_context",
            {"query": "which database does payments-api use", "persist": True, "project": PROJECT},
        ).structured_content
        snapshot = session.call_tool(
            "knowledge_create_snapshot", {"project": PROJECT}
        ).structured_content
        found = session.call_tool(
            "knowledge_search", {"query": "payments-api database", "project": PROJECT}
        ).structured_content
    shared_keys = [result["fact_key"] for result in found["results"]]
    assert shared_keys, found
    pack_id = pack["pack_id"]
    result_refs = [result.get("result_ref") or result["fact_key"] for result in pack["results"]]
    return {
        "fact_key": [proposed["fact"]["fact_key"], *shared_keys],
        "pack_id": [pack_id],
        "context_pack_id": [pack_id],
        "result_ref": result_refs or [pack_id],
        "snapshot_id": [snapshot["snapshot_id"]],
        "entity": ["payments-api", "payments"],
        "source_id": ["adr-1"],
        "project": [PROJECT],
        "repository": [REPOSITORY],
        "repository_ref": [REPOSITORY],
        "branch": ["main"],
        "code_path": ["services/payments"],
        "predicate": ["uses"],
        "as_of": ["2025-06-01T00:00:00Z"],
        "known_as_of": ["2030-01-01T00:00:00Z"],
    }


class Fuzzed:
    def __init__(self, stack: LaunchedStack, known: dict[str, list[Any]]) -> None:
        self.stack = stack
        self.known = known
        with mcp_session(stack) as session:
            tools = session.run(session.client.list_tools).tools
        self.schemas = {tool.name: tool.input_schema for tool in tools}


@pytest.fixture(scope="module")
def fuzzed(stack: LaunchedStack, tmp_path_factory: pytest.TempPathFactory) -> Fuzzed:
    return Fuzzed(stack, seed(stack, tmp_path_factory.mktemp("fuzz-tools")))


def test_every_profile_serves_its_tools_with_the_widest_profiles_schemas(fuzzed) -> None:
    # So fuzzing the widest profile fuzzes every tool of every profile.
    assert sorted(fuzzed.schemas) == sorted(TOOLS)
    for profile in PROFILES:
        for spec in tools_for_profile(profile):
            assert spec.definition().input_schema == fuzzed.schemas[spec.name], spec.name


@pytest.mark.parametrize("tool", TOOLS)
def test_schema_generated_and_edge_arguments_never_break_the_error_contract(
    fuzzed: Fuzzed, tool: str
) -> None:
    stack, schema = fuzzed.stack, fuzzed.schemas[tool]
    offset = log_offset(stack)
    with mcp_session(stack) as session:

        @fuzz_settings()
        @given(arguments=arguments_strategy(schema, fuzzed.known))
        def holds(arguments: dict[str, Any]) -> None:
            why = judged(session, tool, arguments)
            assert why is None, why

        holds()
        for name in sorted(schema["properties"]):  # every edge value, not only those drawn
            for value in edge_values(name, schema["properties"][name]):
                why = judged(session, tool, {**minimal(schema, fuzzed.known), name: value})
                assert why is None, why
        assert session.tool_names() == sorted(TOOLS)
        server_errors = [status for status in session.statuses if status >= 500]
        assert not server_errors, server_errors
    assert not serving(stack)
    assert not failures_logged_since(stack, offset)


def minimal(schema: dict[str, Any], known: dict[str, list[Any]]) -> dict[str, Any]:
    """The required arguments (and an entity, which the graph tools need one way or the
    other), each a value that names something or a plain one."""
    out: dict[str, Any] = {}
    anchors = ["entity"] if "entity" in schema["properties"] else []
    for name in [*schema["required"], *anchors]:
        prop = schema["properties"][name]
        if name in known:
            out[name] = known[name][0]
        elif "enum" in prop:
            out[name] = prop["enum"][0]
        else:
            out[name] = "payments-api database"
    return out


# Raw bodies: what no JSON encoder of a client writes, each value at its own argument.
RAW_VALUES = [
    '"\\ud800"',
    '"x\\udfff"',
    '"\\udc00\\ud800"',
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "123456789012345678901234567890123456789",
    "[" * 3000 + "]" * 3000,
    '{"a":' * 3000 + "1" + "}" * 3000,
]


def raw_call(tool: str, arguments_json: str) -> bytes:
    return (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"'
        + tool
        + '","arguments":'
        + arguments_json
        + "}}"
    ).encode()


@pytest.mark.parametrize("raw", RAW_VALUES)
def test_raw_json_no_client_would_send_is_refused_as_a_structured_error(
    fuzzed: Fuzzed, raw: str
) -> None:
    stack = fuzzed.stack
    offset = log_offset(stack)
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2025-06-18",
        "authorization": f"Bearer {stack.mcp_token()}",
    }
    failures = []
    with httpx.Client(timeout=30) as http:
        for tool, schema in sorted(fuzzed.schemas.items()):
            for name in sorted(schema["properties"]):
                required = {k: v for k, v in minimal(schema, fuzzed.known).items() if k != name}
                body = json.dumps(required)[:-1].rstrip("{")
                arguments = (
                    "{" + body + ("," if required else "") + json.dumps(name) + ":" + raw + "}"
                )
                response = http.post(
                    stack.mcp_url, content=raw_call(tool, arguments), headers=headers
                )
                error = response.json().get("error") if response.status_code < 500 else None
                if response.status_code >= 500 or error is None:
                    failures.append(f"{tool}.{name}: {response.status_code} {response.text}")
                elif error["code"] == INTERNAL_ERROR:
                    failures.append(f"{tool}.{name}: internal_error")
                elif error["code"] == INVALID_INPUT and isinstance(error.get("data"), dict):
                    if error["data"].get("field") != name:
                        failures.append(f"{tool}.{name}: names {error['data']}")
    assert not failures, "\n".join(failures[:20])
    assert not serving(stack)
    assert not failures_logged_since(stack, offset)


def test_fuzzed_writes_left_the_change_log_tailers_running(fuzzed: Fuzzed) -> None:
    """Fuzzed proposals went through knowledge into retrieval's tailer in the background; a
    fact proposed now must still become searchable, so no fuzzed write stopped it."""
    marker = "zebrafinch-quokka-fuzzcheck"
    with mcp_session(fuzzed.stack) as session:
        session.call_tool(
            "knowledge_propose",
            {"subject": marker, "predicate": "uses", "object": "a canary database"},
        )
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:
            found = session.call_tool("knowledge_search", {"query": marker}).structured_content
            if any(result["subject"] == marker for result in found["results"]):
                return
            time.sleep(0.3)
    pytest.fail("a fact proposed after the fuzz never became searchable")
