"""What the hostile-input suites share: a real stack per module (`vera up` through the one
launcher, ``vera.stack.launcher.launch``: embedded PostgreSQL, the four services, the gateway
and the REST API as child processes), the official MCP client over HTTP with every HTTP status it
received recorded, and the checks that the stack still serves."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from vera.stack.launcher import LaunchedStack, launch, launch_env


def fuzz_settings() -> settings:
    """The profile chosen with ``--hypothesis-profile`` when it is one of ours, else
    ``vera-fuzz`` (also under CI, where Hypothesis would pick its own ``ci`` profile)."""
    current = settings.get_current_profile_name()
    return settings.get_profile(current if current.startswith("vera-fuzz") else "vera-fuzz")


@contextlib.contextmanager
def running_stack(data_dir: Path, **env: str) -> Iterator[LaunchedStack]:
    with launch(data_dir, launch_env(data_dir, **env)) as stack:
        yield stack


def api_url(stack: LaunchedStack) -> str:
    return json.loads((stack.data_dir / "run" / "stack.json").read_text())["api_url"]


def base_url(stack: LaunchedStack) -> str:
    return stack.mcp_url.removesuffix("/mcp")


@dataclass
class Session:
    """One official MCP client, held open in a background event loop so synchronous
    Hypothesis tests can call through it; ``statuses`` is every HTTP status it received."""

    portal: BlockingPortal
    client: Client
    statuses: list[int] = field(default_factory=list)

    def run(self, call: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        return self.portal.call(call, *args)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.run(self.client.call_tool, name, arguments)

    def tool_names(self) -> list[str]:
        return sorted(tool.name for tool in self.run(self.client.list_tools).tools)


@contextlib.contextmanager
def mcp_session(stack: LaunchedStack) -> Iterator[Session]:
    with start_blocking_portal() as portal:
        statuses: list[int] = []

        async def record(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0), event_hooks={"response": [record]},
                                  headers={"authorization": f"Bearer {stack.mcp_token()}"})
        client = Client(streamable_http_client(stack.mcp_url, http_client=http))
        with portal.wrap_async_context_manager(client) as entered:
            yield Session(portal, entered, statuses)
        portal.call(http.aclose)


def serving(stack: LaunchedStack) -> list[str]:
    """What is wrong with the stack's serving state: `vera up` alive, the gateway live, the
    REST API ready (every service healthy). Empty when all is well."""
    problems = []
    if stack.process is None or stack.process.poll() is not None:
        problems.append("vera up exited")
    health = httpx.get(f"{base_url(stack)}/healthz", timeout=10)
    if health.status_code != 200:
        problems.append(f"gateway /healthz {health.status_code}")
    ready = httpx.get(f"{api_url(stack)}/readyz", timeout=10)
    if ready.status_code != 200:
        problems.append(f"api /readyz {ready.status_code}")
    return problems


def log_offset(stack: LaunchedStack) -> int:
    return stack.log_path.stat().st_size if stack.log_path.exists() else 0


def failures_logged_since(stack: LaunchedStack, offset: int) -> list[str]:
    """Log lines past ``offset`` that report an unexpected failure in any process (a
    background loop that died answers no call, so only its log tells)."""
    with stack.log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    return [
        line
        for line in text.splitlines()
        if "Traceback" in line or " ERROR " in line or " CRITICAL " in line
    ]
