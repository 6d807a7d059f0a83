"""``vera doctor``: after a restart of the runtime, is the ``vera`` server connected and are
its tools visible, and which step is still missing?

The runtime's own CLI answers for the runtime (read-only invocations only, under the user's
own settings: doctor never switches a trust gate off); VERA's tools are listed with the
official MCP client. The token goes only to the endpoint it was minted for, as the user's
untracked state records it; a tracked file that names another endpoint is reported and
nothing is sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import time
from pathlib import Path

import jwt

from vera.integrations import editors
from vera.integrations.artifacts import HOOK_TIMEOUT_S
from vera.integrations.editors import fingerprint, text_fingerprint
from vera.integrations.endpoints import credential_refusal
from vera.integrations.ownership import (
    CREDENTIAL_FILES,
    MINTED_FOR_PATH,
    TOKEN_PATH,
    Connection,
    Entry,
    read_record,
)
from vera.integrations.runtimes import ADAPTERS, TOKEN_ENV_VAR, Finding, profile_line, run_cli

TOOLS_TIMEOUT_SECONDS = 10.0
# The reads every save mode's token carries (commands.SAVE_MODE_SCOPES).
NEEDED_SCOPES = ("memory:read", "memory:snapshot", "memory:feedback")


def _read(root: Path, rel: str) -> str | None:
    path = root / rel
    return path.read_text().strip() if path.is_file() and not path.is_symlink() else None


async def _tools(url: str, token: str | None) -> list[str]:
    # Imported here: every `vera` command builds the parser that imports this module, and
    # the MCP client (~1.1 s) would delay each service's start under `vera up`.
    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def _root_causes(exc: BaseException) -> list[BaseException]:
    """The errors under the MCP client's task groups (an ExceptionGroup names none)."""
    if isinstance(exc, BaseExceptionGroup):
        return [cause for inner in exc.exceptions for cause in _root_causes(inner)]
    return [exc]


# The MCP client's transport errors for "nothing answers there" (its HTTP library is not
# always the httpx this package imports, so they are told by name).
UNREACHABLE_ERRORS = ("ConnectError", "ConnectTimeout")


def _tools_finding(url: str, token: str | None) -> Finding:
    try:
        names = asyncio.run(asyncio.wait_for(_tools(url, token), TOOLS_TIMEOUT_SECONDS))
    except Exception as exc:  # any transport or protocol failure is the finding itself
        causes = _root_causes(exc)
        if any(type(c).__name__ in UNREACHABLE_ERRORS or isinstance(c, ConnectionError)
               for c in causes):
            return Finding("vera tools visible", False, f"cannot list tools: cannot reach "
                           f"{url}: the stack is "
                           "down; start it with `vera up` (or ask whoever runs your team's "
                           "deployment), then run `vera doctor` again")
        refusal = credential_refusal(url, token)
        if refusal is not None:  # a rotated key, an expired or revoked token...
            return Finding("vera tools visible", False, f"cannot list tools: {refusal}; "
                           "`vera connect` obtains a new one")
        return Finding("vera tools visible", False,
                       f"cannot list tools: {type(causes[0]).__name__}")
    return Finding("vera tools visible", bool(names), f"{len(names)} tools")


def _unchanged(root: Path, entry: Entry) -> bool:
    """Whether what connect wrote (a whole file, or one key or item inside a config, such
    as an approval rule) is still there as written."""
    text = _read(root, entry.file)
    if text is None:
        return False
    if entry.kind == "file":
        return text_fingerprint((root / entry.file).read_text()) == entry.sha256
    try:
        parsed = editors.parse_toml(text) if entry.kind == "toml-key" else editors.parse_json(text)
    except editors.UnsafeEdit:
        return False
    current = editors.get_path(parsed, entry.path)
    if entry.kind == "json-item":
        return isinstance(current, list) and any(fingerprint(i) == entry.sha256 for i in current)
    return current is not None and fingerprint(current) == entry.sha256


def _files(root: Path, connection: Connection) -> list[Finding]:
    files = [e for e in connection.entries if e.kind == "file"]
    rules = [e for e in connection.entries if e.kind != "file"]
    changed = [e.describe() for e in files if not _unchanged(root, e)]
    edited = [e.describe() for e in rules if not _unchanged(root, e)]
    return [Finding("vera files unchanged", not changed,
                    "as connect wrote them" if not changed else "changed since connect: "
                    + ", ".join(changed) + "; restore them or connect again"),
            Finding("vera config and approval rules unchanged", not edited,
                    "as connect wrote them" if not edited else "changed since connect: "
                    + ", ".join(edited) + "; restore them or connect again")]


def _hook_finding(root: Path, connection: Connection) -> list[Finding]:
    """Runs the SessionStart hook the way the runtime does, offline."""
    hooks = [e.file for e in connection.entries if e.file.endswith("/vera_hook.py")]
    if not hooks:
        return []
    try:
        done = subprocess.run(["python3", str(root / hooks[0]), "session-start", "--runtime",
                               "doctor"], cwd=root, input="{}", capture_output=True,
                              text=True, timeout=HOOK_TIMEOUT_S)
        output = json.loads(done.stdout)["hookSpecificOutput"]
        runs = output["hookEventName"] == "SessionStart" and bool(output["additionalContext"])
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
        runs = False
    return [Finding("vera hook runs", runs, f"{hooks[0]} answers" if runs else
                    f"{hooks[0]} does not answer: check python3 is on PATH")]


def _configured_url(root: Path, name: str) -> object:
    """The URL the runtime's tracked config sends its ``vera`` requests to."""
    adapter = ADAPTERS[name]
    rel = adapter.mcp_file(root)
    text = _read(root, rel) or ""
    try:
        parsed = editors.parse_toml(text) if rel.endswith(".toml") else editors.parse_json(text)
    except editors.UnsafeEdit:
        return None
    server = editors.get_path(parsed, adapter.SERVER_PATH)
    return server.get("url") if isinstance(server, dict) else None


def _tracked(root: Path, rels: list[str]) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--", *rels], cwd=root, capture_output=True,
                            text=True)
    return listed.stdout.split()


def _credential_findings(root: Path, name: str, connection: Connection,
                         env: dict[str, str]) -> tuple[list[Finding], str | None]:
    """The static token's state; the token is returned only when it may be sent."""
    token, minted_for = _read(root, TOKEN_PATH), _read(root, MINTED_FOR_PATH)
    if token is None or minted_for is None:
        return [Finding("mcp token", False, f"no token in {TOKEN_PATH}: run `vera connect "
                        f"{name}` and give the API key")], None
    tracked = _tracked(root, sorted(CREDENTIAL_FILES))
    if tracked:
        return [Finding("mcp token private", False, f"{', '.join(tracked)} is tracked by Git: "
                        "remove it from Git (git rm --cached), revoke the token and connect "
                        "again; nothing was sent")], None
    loose = [rel for rel in sorted(CREDENTIAL_FILES) if (root / rel).exists()
             and stat.S_IMODE((root / rel).stat().st_mode) != 0o600]
    findings = [Finding("mcp token private", not loose, "owner-only (0600)" if not loose else
                        f"{', '.join(loose)} readable by others: chmod 600 them")]
    steered = {url for url in (connection.mcp_url, _configured_url(root, name))
               if url != minted_for}
    if steered:
        findings.append(Finding("mcp endpoint", False, f"a tracked file now names "
                                f"{', '.join(map(str, steered))} but your token was minted "
                                f"for {minted_for}; nothing was sent. If your team moved "
                                f"VERA, run `vera connect {name} --mcp-url <new url>`"))
        return findings, None
    findings.append(Finding("mcp endpoint", True, "the one the token was minted for"))
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        claims = {}
    expiry = claims.get("exp")
    expired = isinstance(expiry, (int, float)) and expiry < time.time()
    findings.append(Finding("mcp token expiry", not expired, "expired: run `vera connect "
                            f"{name}` again" if expired else "no expiry" if expiry is None
                            else f"expires {time.strftime('%Y-%m-%d', time.gmtime(expiry))}"))
    raw = claims.get("scope", claims.get("scp", ""))
    granted = set(raw.split() if isinstance(raw, str) else raw or ())
    missing = [scope for scope in NEEDED_SCOPES if scope not in granted]
    findings.append(Finding("mcp token scopes", not missing, " ".join(sorted(granted)) if not
                            missing else f"lacks {' '.join(missing)}: run `vera connect "
                            f"{name}` again"))
    if not ADAPTERS[name].READS_SECRET_FROM_FILE:
        seen = env.get(TOKEN_ENV_VAR) == token
        findings.append(Finding(f"{name} sees the token", seen, f"{TOKEN_ENV_VAR} is exported"
                                if seen else f"{name} reads the token only from its "
                                f"environment: add to your shell profile and open a new "
                                f"shell: {profile_line(root)}"))
    return findings, token


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
        findings = _files(root, connection) + _hook_finding(root, connection)
        findings.append(Finding("vera approval", True, ADAPTERS[name].APPROVAL))
        token = None
        if connection.credential.startswith("file:"):
            credential, token = _credential_findings(root, name, connection, env)
            findings += credential
            if token is None:  # the runtime would send it where a tracked file says
                report[name] = findings
                continue
        findings += ADAPTERS[name].probe(root, env, run_cli, Finding)
        findings.append(_tools_finding(connection.mcp_url, token))
        report[name] = findings
    return report
