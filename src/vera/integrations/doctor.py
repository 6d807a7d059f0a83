"""``vera doctor``: after a restart of the runtime, is the ``vera`` server connected and are
its tools visible, and which trust step is still missing?

The runtime's own CLI answers for the runtime (read-only invocations only); VERA's tools are
listed with the official MCP client using the credential the config references. A missing
trust step is named, never bypassed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from vera.integrations.editors import text_fingerprint
from vera.integrations.endpoints import credential_refusal
from vera.integrations.ownership import TOKEN_PATH, Connection, read_record
from vera.integrations.runtimes import ADAPTERS, TOKEN_ENV_VAR, Finding, run_cli

TOOLS_TIMEOUT_SECONDS = 10.0


def _token(root: Path, env: dict[str, str]) -> str | None:
    if env.get(TOKEN_ENV_VAR):
        return env[TOKEN_ENV_VAR]
    path = root / TOKEN_PATH
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith(f"{TOKEN_ENV_VAR}="):
                return line.split("=", 1)[1]
    return None


async def _tools(url: str, token: str | None) -> list[str]:
    # Imported here: every `vera` command builds the parser that imports this module, and
    # the MCP client (~1.1 s) would delay each service's start under `vera up`.
    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def _tools_finding(connection: Connection, token: str | None) -> Finding:
    if connection.credential.startswith("env:") and token is None:
        return Finding("vera tools visible", False,
                       f"set {TOKEN_ENV_VAR} (for example from {TOKEN_PATH}) before starting "
                       "the runtime")
    try:
        names = asyncio.run(asyncio.wait_for(_tools(connection.mcp_url, token),
                                             TOOLS_TIMEOUT_SECONDS))
    except Exception as exc:  # any transport or protocol failure is the finding itself
        refusal = credential_refusal(connection.mcp_url, token)
        return Finding("vera tools visible", False,
                       f"cannot list tools: {refusal or type(exc).__name__}")
    return Finding("vera tools visible", bool(names), f"{len(names)} tools")


def _files(root: Path, connection: Connection) -> list[Finding]:
    changed = [e.file for e in connection.entries if e.kind == "file"
               and (not (root / e.file).exists()
                    or text_fingerprint((root / e.file).read_text()) != e.sha256)]
    return [Finding("vera files unchanged", not changed,
                    "as connect wrote them" if not changed else
                    "changed since connect: " + ", ".join(changed))]


def diagnose(root: Path, runtime: str | None, env: dict[str, str] | None = None
             ) -> dict[str, list[Finding]]:
    env = dict(os.environ if env is None else env)
    connections = read_record(root)
    names = [runtime] if runtime else sorted(connections)
    report: dict[str, list[Finding]] = {}
    for name in names:
        connection = connections.get(name)
        if connection is None:
            report[name] = [Finding("connected", False, f"run `vera connect {name}` first")]
            continue
        findings = _files(root, connection)
        findings += ADAPTERS[name].probe(root, env, run_cli, Finding)
        findings.append(_tools_finding(connection, _token(root, env)))
        report[name] = findings
    return report
