"""Every published input bound of every tool of every profile, walked through the real
stack: the bounds are read from ``tools/list`` (the official MCP client), and each one is
called on the real gateway over HTTP in front of the four real services on PostgreSQL.

A value AT a bound must get past every layer (any outcome but a bound failure or
internal_error is fine: a 512-character fact_key is simply not found); a value just past
it must be refused as invalid_input naming the argument. This is what keeps the schema a
client reads and the limits the services enforce one contract. Text at a bound is made of
four-byte characters in no repeating order, the most storage its length can take.
"""

from __future__ import annotations

import contextlib
import math
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from harness import LOCAL_TOKEN_KEY, mcp_client, serve_mcp, serve_service
from mcp import Client
from mcp.shared.exceptions import MCPError

from vera.config import McpSettings, ObservabilitySettings, ServiceAddresses, Settings
from vera.gateway.app import build_app as build_gateway
from vera.gateway.profiles import PROFILES
from vera.services.identity import server as identity_server
from vera.services.knowledge import server as knowledge_server
from vera.services.retrieval import server as retrieval_server
from vera.services.snapshot import server as snapshot_server

INVALID_INPUT = -32602
INTERNAL_ERROR = -32603
# invalid_input reasons about what a value says, not how long or large it is: an id that
# names nothing, a cursor no page ever returned, a predicate outside the ontology. Meeting
# one at a bound is an outcome.
CONTENT_REASONS = {"not_found", "not_in_pack", "malformed", "unknown_predicate"}
TIMESTAMP = "2025-01-01T00:00:00Z"
REPOSITORY = "github.com/acme/"
PREDICATE = "uses"  # one the ontology allows, so a proposal reaches its other checks
SUBJECT = "bounds-walk"
# Arguments whose value has a shape beyond its length; the rest are free text or opaque.
SHAPED = {"as_of", "known_as_of", "repository", "repository_ref"}
# Arguments at least one of which a tool needs (a check across arguments, not in the schema).
ONE_OF = {
    "knowledge_proposal_report": ("task_ref", "session_ref", "runtime", "repository_ref"),
    "knowledge_get_entity": ("entity", "entity_id"),
    "knowledge_explore": ("entity", "entity_id"),
}


def text_of(name: str, length: int) -> str:
    """A well-shaped value of exactly ``length`` characters for argument ``name``."""
    if name in ("as_of", "known_as_of"):
        return TIMESTAMP.rjust(length)  # surrounding blanks are allowed
    if name in ("repository", "repository_ref"):
        return REPOSITORY + "r" * (length - len(REPOSITORY))
    rng = random.Random(length)
    return "".join(chr(rng.randrange(0x20000, 0x2A6E0)) for _ in range(length))


def minimal(name: str, schema: dict[str, Any], known: dict[str, str]) -> Any:
    if name in known:
        return known[name]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "string":
        if name == "predicate":
            return PREDICATE
        if name in SHAPED:
            return text_of(name, max(len(TIMESTAMP), len(REPOSITORY) + 4))
        return str(uuid.uuid4())
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return [minimal_item(schema["items"], known)]
    raise AssertionError(f"no minimal value for {name}: {schema}")


def minimal_item(items: dict[str, Any], known: dict[str, str]) -> Any:
    if items.get("type") == "object":
        return {key: minimal(key, items["properties"][key], known) for key in items["required"]}
    return "p"


@dataclass(frozen=True)
class Case:
    tool: str
    field: str
    label: str  # which bound, for the failure report
    value: Any
    accepted: bool  # at the bound (True) or just past it (False)


def string_cases(tool: str, name: str, schema: dict[str, Any]) -> Iterator[Case]:
    high, low = schema.get("maxLength"), schema.get("minLength", 0)
    if high is not None:
        yield Case(tool, name, f"maxLength={high}", text_of(name, high), True)
        yield Case(tool, name, f"maxLength+1={high + 1}", text_of(name, high + 1), False)
    if low > 0:
        yield Case(tool, name, f"minLength-1={low - 1}", "x" * (low - 1), False)


def number_cases(tool: str, name: str, schema: dict[str, Any]) -> Iterator[Case]:
    integer = schema["type"] == "integer"
    for key, outward in (("minimum", -math.inf), ("maximum", math.inf)):
        if key not in schema:
            continue
        bound = schema[key]
        past = bound + (1 if outward > 0 else -1) if integer else math.nextafter(bound, outward)
        yield Case(tool, name, f"{key}={bound}", bound, True)
        yield Case(tool, name, f"past {key}={past!r}", past, False)


def array_cases(tool: str, name: str, schema: dict[str, Any]) -> Iterator[Case]:
    items = schema["items"]
    item = minimal_item(items, {})
    if "maxItems" in schema:
        most = schema["maxItems"]
        yield Case(tool, name, f"maxItems={most}", [item] * most, True)
        yield Case(tool, name, f"maxItems+1={most + 1}", [item] * (most + 1), False)
    if items.get("type") == "string":
        nested = string_cases(tool, name, items)
        yield from (Case(tool, name, f"item {c.label}", [c.value], c.accepted) for c in nested)
    elif items.get("type") == "object":
        for key, prop in items["properties"].items():
            for c in string_cases(tool, key, prop):
                yield Case(tool, name, f"item.{key} {c.label}", [{**item, key: c.value}],
                           c.accepted)


def cases_of(tool: str, input_schema: dict[str, Any]) -> Iterator[Case]:
    for name, schema in input_schema["properties"].items():
        kind = schema.get("type")
        if kind == "string" and "enum" not in schema:
            yield from string_cases(tool, name, schema)
        elif kind in ("integer", "number"):
            yield from number_cases(tool, name, schema)
        elif kind == "array":
            yield from array_cases(tool, name, schema)


def arguments_for(case: Case, input_schema: dict[str, Any], known: dict[str, str]
                  ) -> dict[str, Any]:
    """The case's value plus the least the tool needs besides it."""
    properties = input_schema["properties"]
    args = {name: minimal(name, properties[name], known) for name in input_schema["required"]}
    group = ONE_OF.get(case.tool, ())
    if case.field not in group and group:
        args[group[0]] = minimal(group[0], properties[group[0]], known)
    args[case.field] = case.value
    return args


async def outcome(client: Client, tool: str, args: dict[str, Any]) -> MCPError | None:
    try:
        await client.call_tool(tool, args)
    except MCPError as error:
        return error
    return None


def judged(case: Case, error: MCPError | None) -> str | None:
    """Why the outcome breaks the contract, or None."""
    code = error.error.code if error else None
    data = dict(error.error.data or {}) if error else {}
    if code == INTERNAL_ERROR:
        return "internal_error"
    if case.accepted:
        if code == INVALID_INPUT and data.get("reason") not in CONTENT_REASONS:
            return f"refused at the bound: {data}"
        return None
    if code != INVALID_INPUT or data.get("field") != case.field:
        return f"not refused as invalid_input naming {case.field}: {code} {data}"
    return None


async def new_database(admin_dsn: str) -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return name


@contextlib.asynccontextmanager
async def real_stack(dsn: str, data_dir: Any, embedder: Any) -> AsyncIterator[dict[str, str]]:
    """The four services on ``dsn`` and one local-dev gateway per profile: profile -> URL."""
    async with contextlib.AsyncExitStack() as exits:
        async def host(module: Any, settings: Settings, **kw: Any) -> str:
            return await exits.enter_async_context(serve_service(module, settings, **kw))

        database = {"dsn": dsn}
        identity = await host(identity_server, Settings(database=database))
        knowledge = await host(knowledge_server, Settings(database=database))
        upstream = ServiceAddresses(knowledge=knowledge)
        retrieval = await host(retrieval_server, Settings(
            database=database, services=upstream, data_dir=data_dir), embedder=embedder)
        snapshot = await host(snapshot_server, Settings(database=database, services=upstream))
        addresses = ServiceAddresses(identity=identity, knowledge=knowledge,
                                     retrieval=retrieval, snapshot=snapshot)
        urls = {}
        for profile in PROFILES:
            settings = Settings(
                environment="local",
                mcp=McpSettings(
                    local_token_key=LOCAL_TOKEN_KEY,
                    port=0,
                    tool_profile=profile,
                    quota_enabled=False,
                ),
                services=addresses,
                observability=ObservabilitySettings(mcp_metrics_enabled=False),
            )
            urls[profile] = await exits.enter_async_context(serve_mcp(build_gateway(settings)))
        yield urls


async def seeded(url: str) -> dict[str, str]:
    """Ids that name something, so a call with one gets past its look-up to the checks of
    the argument under test: a proposed fact, its subject, a persisted pack, a snapshot."""
    async with mcp_client(url) as client:
        proposed = await client.call_tool("knowledge_propose", {
            "subject": SUBJECT, "predicate": PREDICATE, "object": "postgres"})
        pack = await client.call_tool("knowledge_get_context", {
            "query": "what does the bounds walk use", "persist": True})
        snapshot = await client.call_tool("knowledge_create_snapshot", {})
    pack_id = pack.structured_content["pack_id"]
    return {"fact_key": proposed.structured_content["fact"]["fact_key"], "entity": SUBJECT,
            "pack_id": pack_id, "context_pack_id": pack_id, "result_ref": pack_id,
            "snapshot_id": snapshot.structured_content["snapshot_id"]}


@dataclass(frozen=True)
class Walk:
    urls: dict[str, str]  # profile -> MCP URL
    known: dict[str, str]  # argument -> a value that names something


@pytest.fixture(scope="module")
async def walk(embedded_pg, embedder, tmp_path_factory) -> AsyncIterator[Walk]:
    name = await new_database(embedded_pg.admin_dsn())
    try:
        async with real_stack(embedded_pg.dsn(name), tmp_path_factory.mktemp("bounds"),
                              embedder) as urls:
            yield Walk(urls, await seeded(urls["advanced"]))
    finally:
        admin = await asyncpg.connect(embedded_pg.admin_dsn())
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def listed(url: str) -> dict[str, dict[str, Any]]:
    async with mcp_client(url) as client:
        return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("profile", PROFILES)
async def test_every_published_bound_holds_through_the_real_services(walk, profile):
    tools = await listed(walk.urls[profile])
    # A tool a smaller profile serves with the same schema runs the same guard and handler
    # there, and is walked there.
    smaller = PROFILES[: PROFILES.index(profile)]
    walked_before = [await listed(walk.urls[p]) for p in smaller]
    own = {name: schema for name, schema in tools.items()
           if not any(before.get(name) == schema for before in walked_before)}
    assert own
    failures, walked = [], 0
    async with mcp_client(walk.urls[profile]) as client:
        for name, schema in own.items():
            for case in cases_of(name, schema):
                walked += 1
                error = await outcome(client, name, arguments_for(case, schema, walk.known))
                why = judged(case, error)
                if why:
                    failures.append(f"{name}.{case.field} {case.label}: {why}")
    assert walked > len(own)
    assert not failures, "\n".join(failures)
