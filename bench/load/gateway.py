"""The gateway mix: MCP ``tools/call`` over HTTP as many agents send them.

get_context 40 %, search 30 %, other reads 20 % (bootstrap, explain, evidence, a persisted
pack, the proposal report), writes 10 % (proposals, feedback, persisted packs), each call
as a random principal on one of its projects with one of its corpus's questions. Calls are
the JSON-RPC body the official client sends (``bench.gateway_overhead.request_body``, the
stateless 2026-07-28 era, no handshake), posted with httpx: a load generator must not
spend the client's own per-call work on the two cores it shares with the stack.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import httpx

from bench.gateway_overhead import MODERN, request_body, request_headers
from bench.load.openloop import OK, Call, Operation
from bench.load.seed import Principal, World

# The gateway's own budget for a call is 30 s; the client waits a little longer so the
# server's answer (a structured error) is what gets counted, not a client timeout.
CLIENT_TIMEOUT_S = 40.0
CONNECTIONS = 256


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=CLIENT_TIMEOUT_S,
        limits=httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS),
    )


def outcome(response: httpx.Response) -> tuple[str, dict[str, Any] | None]:
    """(OK or the MCP error code, structuredContent). A JSON-RPC error is its
    ``data.code`` (with ``[field]`` when it names one); an HTTP refusal before JSON-RPC is
    ``http_<status>``."""
    try:
        message = response.json()
    except ValueError:
        return f"http_{response.status_code}", None
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        data = message["error"].get("data")
        if isinstance(data, dict) and isinstance(data.get("code"), str):
            # The field an invalid_input names says which of the mix's arguments was wrong.
            field = data.get("field")
            return (f"{data['code']}[{field}]" if isinstance(field, str) else data["code"]), None
        return f"jsonrpc_{message['error'].get('code')}", None
    if response.status_code != 200:
        return f"http_{response.status_code}", None
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict):
        return "malformed_response", None
    if result.get("isError"):
        return "tool_error", None
    return OK, result.get("structuredContent")


async def call_tool(
    http: httpx.AsyncClient, url: str, token: str | None, tool: str, args: dict[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    headers = request_headers(tool, MODERN, token)
    body = request_body(tool, MODERN, args)
    response = await http.post(url, json=body, headers=headers)
    return outcome(response)


class GatewayMix:
    """The operations of the mix over one seeded world."""

    def __init__(self, http: httpx.AsyncClient, url: str, world: World) -> None:
        self._http = http
        self._url = url
        self._world = world
        self._packs: dict[str, tuple[str, list[str]]] = {}  # principal -> (pack, result refs)
        self._serial = itertools.count()

    async def prepare(self) -> None:
        """One persisted pack per principal, for the pack reads and the feedback."""
        for principal in self._world.principals:
            project = principal.projects[0]
            code, content = await call_tool(
                self._http,
                self._url,
                principal.token,
                "knowledge_get_context",
                {
                    "query": project.queries[0],
                    "project": project.slug,
                    "limit": 10,
                    "persist": True,
                },
            )
            if code != OK or not content or not content.get("pack_id"):
                raise RuntimeError(f"could not persist a context pack for the load: {code}")
            refs = [r["result_ref"] for r in content.get("results") or []] or [content["pack_id"]]
            self._packs[principal.principal_id] = (content["pack_id"], refs)

    def _tool(self, tool: str, build) -> Any:
        def make(rng: random.Random) -> Call:
            principal = rng.choice(self._world.principals)
            args = build(rng, principal)

            async def call() -> str:
                code, _ = await call_tool(self._http, self._url, principal.token, tool, args)
                return code

            return call

        return make

    def _session(self, principal: Principal) -> str:
        return f"load-{self._world.tag}-{principal.principal_id[:8]}"

    def operations(self) -> list[Operation]:
        def context(rng: random.Random, p: Principal, persist: bool = False) -> dict[str, Any]:
            project = rng.choice(p.projects)
            return {
                "query": rng.choice(project.queries),
                "project": project.slug,
                "limit": 10,
                "token_budget": 2000,
                "persist": persist,
            }

        def search(rng: random.Random, p: Principal) -> dict[str, Any]:
            project = rng.choice(p.projects)
            args: dict[str, Any] = {"query": rng.choice(project.queries), "limit": 10}
            if rng.random() < 0.5:  # the other half searches every readable scope
                args["project"] = project.slug
            return args

        def fact(rng: random.Random, p: Principal) -> str:
            return rng.choice(rng.choice(p.projects).fact_keys)

        def pack(p: Principal) -> str:
            return self._packs[p.principal_id][0]

        def propose(rng: random.Random, p: Principal) -> dict[str, Any]:
            n = next(self._serial)
            return {
                "subject": f"load-{self._world.tag}-service-{n}",
                "predicate": "depends_on",
                "object": f"load-{self._world.tag}-library-{n % 97}",
                "runtime": "load",
                "session_ref": self._session(p),
                "task_ref": f"task-{n % 13}",
            }

        def feedback(rng: random.Random, p: Principal) -> dict[str, Any]:
            pack_id, refs = self._packs[p.principal_id]
            return {
                "context_pack_id": pack_id,
                "result_ref": rng.choice(refs),
                "signal": rng.choice(("up", "down")),
            }

        return [
            Operation("get_context", 40, self._tool("knowledge_get_context", context)),
            Operation("search", 30, self._tool("knowledge_search", search)),
            Operation("bootstrap", 4, self._tool("knowledge_bootstrap", lambda r, p: {})),
            Operation(
                "explain_fact",
                5,
                self._tool("knowledge_explain_fact", lambda r, p: {"fact_key": fact(r, p)}),
            ),
            Operation(
                "get_evidence",
                4,
                self._tool(
                    "knowledge_get_evidence", lambda r, p: {"fact_key": fact(r, p), "limit": 5}
                ),
            ),
            Operation(
                "get_context_pack",
                4,
                self._tool("knowledge_get_context_pack", lambda r, p: {"pack_id": pack(p)}),
            ),
            Operation(
                "proposal_report",
                3,
                self._tool(
                    "knowledge_proposal_report", lambda r, p: {"session_ref": self._session(p)}
                ),
            ),
            Operation("propose (write)", 5, self._tool("knowledge_propose", propose)),
            Operation("feedback (write)", 3, self._tool("knowledge_feedback", feedback)),
            Operation(
                "get_context persist (write)",
                2,
                self._tool("knowledge_get_context", lambda r, p: context(r, p, persist=True)),
            ),
        ]
