"""``vera doctor``: after a restart of the runtime, is the ``vera`` server connected and are
its tools visible, and which step is still missing?

The runtime's own CLI answers for the runtime (read-only invocations only, under the user's
own settings: doctor never switches a trust gate off); VERA's tools are listed with the
official MCP client. The token goes only to the endpoint it was minted for, as the user's
untracked state records it; a tracked file that names another endpoint is reported and
nothing is sent.

Doctor never executes a file from the repository, and trusts nothing the tracked
``.vera/integrations.json`` says about itself: it compares the project with what the
installed VERA renders for the setup this user approved (:mod:`vera.integrations.approvals`)
and runs the hook only as its own rendering, when the repository's copy is that same text.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import jwt

from vera.integrations import approvals, credentials, editors, endpoints, workspace
from vera.integrations.approvals import Approval
from vera.integrations.artifacts import HOOK_SCRIPT, HOOK_TIMEOUT_S, SERVER_NAME, WRITE_TOOLS
from vera.integrations.connect import Rendering, render_setup
from vera.integrations.contract import (
    apply_overrides,
    credential_scopes,
    load_contract,
    save_mode,
)
from vera.integrations.endpoints import credential_refusal
from vera.integrations.ownership import (
    RECORD_PATH,
    RUNTIME_OAUTH,
    SHARED,
    Connection,
    credential_files,
    read_record,
)
from vera.integrations.runtimes import ADAPTERS, OAUTH_STEP, Finding, run_cli, scopes

TOOLS_TIMEOUT_SECONDS = 10.0


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


def _error_code(causes: list[BaseException]) -> str | None:
    """The seed's ``data.code`` of a JSON-RPC error the endpoint answered, if any."""
    for cause in causes:
        data = getattr(getattr(cause, "error", None), "data", None)
        if isinstance(data, dict) and isinstance(data.get("code"), str):
            return data["code"]
    return None


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
            return Finding("vera tools visible", False, f"cannot list tools: unreachable: "
                           f"cannot reach {url}: the stack is down; start it with "
                           "`vera up` (or ask whoever runs your team's deployment), then run "
                           "`vera doctor` again")
        if any(isinstance(c, TimeoutError) for c in causes):
            return Finding("vera tools visible", False, f"cannot list tools: timed_out: "
                           f"{url} did not answer within {TOOLS_TIMEOUT_SECONDS:g} s; the "
                           "runtimes keep working without VERA meanwhile; check the stack's "
                           "health (or ask whoever runs your team's deployment)")
        slug = _error_code(causes)
        if slug == "quota_exceeded":
            return Finding("vera tools visible", False, "cannot list tools: quota_exceeded: "
                           "VERA is rate-limiting this credential; the runtimes keep working "
                           "without VERA meanwhile; run `vera doctor` again in a minute")
        refusal = credential_refusal(url, token)
        if refusal is not None:  # a rotated key, an expired or revoked token...
            fix = "" if "vera connect" in refusal else "; `vera connect` obtains a new one"
            return Finding("vera tools visible", False, f"cannot list tools: {refusal}{fix}")
        return Finding("vera tools visible", False,
                       f"cannot list tools: {type(causes[0]).__name__}")
    return Finding("vera tools visible", bool(names), f"{len(names)} tools")


def _sign_in_finding(name: str, approval: Approval) -> Finding:
    """The deployment still names an identity provider, and that provider answers."""
    servers = endpoints.check(approval.api_url, approval.mcp_url).authorization_servers
    if not servers:
        return Finding("vera sign-in", False, "the deployment names no identity provider any "
                       f"more: run `vera connect {name}` again")
    issuer = servers[0].rstrip("/")
    try:
        answer = httpx.get(f"{issuer}/.well-known/openid-configuration",
                           timeout=TOOLS_TIMEOUT_SECONDS, follow_redirects=False)
        answered = answer.status_code == 200 and answer.json().get("issuer") == servers[0]
    except (httpx.HTTPError, ValueError):
        answered = False
    if not answered:
        return Finding("vera sign-in", False, f"the identity provider {issuer} does not answer "
                       "as one; ask whoever runs your team's deployment")
    return Finding("vera sign-in", True, f"through {issuer}: {OAUTH_STEP[name]}; the token "
                   f"stays in {name}'s own store, which doctor does not read")


def _drift(current: Any, wanted: Any, path: tuple[str, ...], rendering: Rendering,
           adapter: ModuleType) -> list[tuple[str, ...]]:
    """Where ``current`` falls short of what VERA renders at ``path``, or loosens it.

    Everything rendered must be there as rendered; beside it, a key or item that is a rule
    for VERA's tools (:func:`_names_vera`) is someone else's rule about VERA, and so is a
    ``*tool*`` key added to VERA's server table.
    """
    if path == adapter.SERVER_PATH:
        if not adapter.equivalent(current, rendering.server):
            return [path]
        extra = [(*path, key) for key in current
                 if key not in wanted and "tool" in key]
        rest = {k: v for k, v in wanted.items() if k not in rendering.server}
        return extra + [d for key, value in rest.items()
                        for d in _drift(current.get(key), value, (*path, key), rendering,
                                        adapter)]
    if isinstance(wanted, Mapping):
        if not isinstance(current, Mapping):
            return [path]
        extra = [(*path, key) for key in current if key not in wanted and _names_vera(key)]
        return extra + [d for key, value in wanted.items()
                        for d in _drift(current.get(key), value, (*path, key), rendering,
                                        adapter)]
    if isinstance(wanted, list):
        if not isinstance(current, list):
            return [path]
        short = any(item not in current for item in wanted)
        loosened = any(isinstance(item, str) and item not in wanted and _names_vera(item)
                       for item in current)
        return [path] if short or loosened else []
    return [] if current == wanted or adapter.serves_as_is(path, current) else [path]


def _names_vera(text: object) -> bool:
    """A rule for VERA's tools in any runtime's spelling (``mcp__vera__x``, ``mcp__vera``,
    ``vera_x``, ``vera*``, Codex's bare tool names); a user's ``Bash(vera doctor)`` is not."""
    return isinstance(text, str) and (
        text.startswith((f"mcp__{SERVER_NAME}", f"{SERVER_NAME}_", f"{SERVER_NAME}*"))
        or text in WRITE_TOOLS)


def _merged_drift(root: Path, rel: str, toml: bool, wanted: dict[str, Any],
                  rendering: Rendering, adapter: ModuleType) -> list[str]:
    text = _read(root, rel)
    try:
        parsed = None if text is None else (editors.parse_toml(text) if toml
                                            else editors.parse_json(text))
    except editors.UnsafeEdit:
        parsed = None
    if parsed is None:
        return [rel]
    return [f"{rel} {'.'.join(path)}".rstrip()
            for path in _drift(parsed, wanted, (), rendering, adapter)]


def _files(root: Path, rendering: Rendering, adapter: ModuleType) -> list[Finding]:
    changed = [a.path for a in rendering.files if _read_exact(root, a.path) != a.content]
    edited = [d for rel, (toml, wanted) in rendering.merges.items()
              for d in _merged_drift(root, rel, toml, wanted, rendering, adapter)]
    return [Finding("vera files unchanged", not changed,
                    "as this VERA renders them" if not changed else "differ from what this "
                    "VERA renders: " + ", ".join(changed) + "; restore them or connect again"),
            Finding("vera config and approval rules unchanged", not edited,
                    "as this VERA renders them" if not edited else "differ from what this "
                    "VERA renders: " + ", ".join(edited) + "; restore them or connect again")]


def _read_exact(root: Path, rel: str) -> str | None:
    path = root / rel
    return path.read_text() if path.is_file() and not path.is_symlink() else None


def _hook_finding(root: Path, rendering: Rendering) -> list[Finding]:
    """Runs the SessionStart hook the way the runtime does, offline: the copy this VERA
    renders, and only when the repository's copy is that same text. Doctor never runs a
    file from the repository, whoever committed it."""
    hooks = [a for a in rendering.files if a.path.endswith(f"/{HOOK_SCRIPT}")]
    if not hooks:
        return []
    rel, source = hooks[0].path, str(hooks[0].content)
    if _read_exact(root, rel) != source:
        return [Finding("vera hook runs", False, f"{rel} is not the hook this VERA renders; "
                        "doctor did not run it: review the change, then connect again")]
    try:
        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder) / HOOK_SCRIPT
            script.write_text(source)
            done = subprocess.run(["python3", str(script), "session-start", "--runtime",
                                   "doctor"], cwd=root, input="{}", capture_output=True,
                                  text=True, timeout=HOOK_TIMEOUT_S)
        output = json.loads(done.stdout)["hookSpecificOutput"]
        runs = output["hookEventName"] == "SessionStart" and bool(output["additionalContext"])
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
        runs = False
    return [Finding("vera hook runs", runs, f"{rel} answers" if runs else
                    f"{rel} does not answer: check python3 is on PATH")]


def _record_finding(name: str, connection: Connection, approval: Approval,
                    effective: dict[str, Any]) -> Finding:
    """The tracked record against what this user approved: a commit that loosens the
    overrides or the contract, or moves the endpoints, is shown, never trusted."""
    differs = [label for label, tracked, approved in (
        ("overrides", connection.overrides, approval.overrides),
        ("contract", connection.contract, effective),
        ("api_url", connection.api_url, approval.api_url),
        ("mcp_url", connection.mcp_url, approval.mcp_url),
        ("credential", connection.credential, approval.credential)) if tracked != approved]
    return Finding("vera record matches your approval", not differs,
                   "contract, overrides and endpoints as you approved them" if not differs
                   else f"{RECORD_PATH} records another {', '.join(differs)} than you "
                   f"approved; review the commit that changed it, then run `vera connect "
                   f"{name}`")


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


def _credential_findings(root: Path, name: str, approval: Approval, mode: str,
                         env: dict[str, str]) -> tuple[list[Finding], str | None]:
    """The static token's state; the token is returned only when it may be sent."""
    files = credential_files(name)
    if approval.credential == SHARED.label:
        return [Finding("mcp token", False, f"shared_credential: {name} sends the token every "
                        f"runtime here shared ({SHARED.token}), whose scopes follow the last "
                        f"connect: run `vera connect {name}` to give it its own")], None
    token, minted_for = _read(root, files.token), _read(root, files.minted_for)
    if token is None or minted_for is None:
        return [Finding("mcp token", False, f"no token in {files.token}: run `vera connect "
                        f"{name}` and give the API key")], None
    tracked = workspace.tracked(root, list(files.paths))
    if tracked:
        return [Finding("mcp token private", False, f"{', '.join(tracked)} is tracked by Git: "
                        "remove it from Git (git rm --cached), revoke the token and connect "
                        "again; nothing was sent")], None
    loose = [rel for rel in files.paths if (root / rel).exists()
             and stat.S_IMODE((root / rel).stat().st_mode) != 0o600]
    findings = [Finding("mcp token private", not loose, "owner-only (0600)" if not loose else
                        f"{', '.join(loose)} readable by others: chmod 600 them")]
    steered = {url for url in (approval.mcp_url, _configured_url(root, name))
               if url != minted_for}
    if steered:
        findings.append(Finding("mcp endpoint", False, f"a tracked file now names "
                                f"{', '.join(map(str, steered))} but your token was minted "
                                f"for {minted_for}; nothing was sent. If your team moved "
                                f"VERA, run `vera connect {name} --mcp-url <new url>`"))
        return findings, None
    findings.append(Finding("mcp endpoint", True, "the one the token was minted for"))
    refresh, token = _refresh_finding(root, name, approval, env, token)
    findings.append(refresh)
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        claims = {}
    expiry = claims.get("exp")
    if not isinstance(expiry, (int, float)):
        ends = Finding("mcp token expiry", False, "token_outdated: minted before tokens "
                       f"ended; run `vera connect {name}`")
    elif expiry < time.time():
        ends = Finding("mcp token expiry", False, f"token_expired: run `vera connect {name}`")
    else:
        ends = Finding("mcp token expiry", True,
                       f"expires {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(expiry))}")
    findings.append(ends)
    raw = claims.get("scope", claims.get("scp", ""))
    granted = set(raw.split() if isinstance(raw, str) else raw or ())
    wanted = set(credential_scopes(name, mode))
    missing, beyond = sorted(wanted - granted), sorted(granted - wanted)
    detail = " ".join(sorted(granted)) if not (missing or beyond) else "; ".join(
        [f"lacks {' '.join(missing)}"] * bool(missing)
        + [f"grants {' '.join(beyond)}, more than {name} in save mode {mode} may hold"]
        * bool(beyond))
    findings.append(Finding("mcp token scopes", not (missing or beyond), detail if not (
        missing or beyond) else f"{detail}: run `vera connect {name}` again"))
    return findings, token


def _refresh_finding(root: Path, name: str, approval: Approval, env: dict[str, str],
                     token: str) -> tuple[Finding, str]:
    """Whether the runtime's token is minted again without the user (and the token it would
    send now: a fresh one when the cached one ends soon, as the runtime's helper does)."""
    minter = credentials.load(root, name)
    title = "mcp token refresh"
    if minter is None or minter.api_url != approval.api_url:
        return Finding(title, False, "nothing stored to mint a new token with: run `vera "
                       f"connect {name}` (with the API key)"), token
    if shutil.which("vera", path=env.get("PATH")) is None:
        return Finding(title, False, f"`vera` is not on {name}'s PATH, so it cannot run "
                       "`vera mcp-token`: install VERA's client where the runtime finds it"
                       ), token
    try:
        token = credentials.current_token(root, name)
    except credentials.NotMinted as exc:
        fix = "" if "vera connect" in exc.detail else f"; run `vera connect {name}`"
        return Finding(title, False, f"cannot mint a new token ({exc}){fix}"), token
    return Finding(title, True, ADAPTERS[name].REFRESH), token


# Managed policy has its own finding per runtime (its probe); this one is about servers.
SERVER_SCOPE_CODES = (scopes.SHADOWING_LOCAL_SERVER, scopes.SHADOWING_MANAGED_SERVER,
                      scopes.MERGING_USER_SERVER)


def _scopes_finding(root: Path, adapter: ModuleType, env: dict[str, str]) -> Finding:
    """A vera server added in another scope after connect, which the runtime would use or
    merge instead of the project's (connect refuses to start with one)."""
    found = [i for i in adapter.scope_issues(root, env) if i.code in SERVER_SCOPE_CODES]
    return Finding("vera server scopes", not found,
                   "; ".join(f"{i.code}: {i.detail}" for i in found) if found
                   else "no other scope replaces or changes the project's vera server")


def diagnose(root: Path, runtime: str | None, env: dict[str, str] | None = None
             ) -> dict[str, list[Finding]]:
    env = dict(os.environ if env is None else env)
    connections = read_record(root)
    approved = approvals.load(root)
    names = [runtime] if runtime else sorted(set(connections) | set(approved))
    report: dict[str, list[Finding]] = {}
    for name in names:
        connection = connections.get(name)
        if connection is None:
            report[name] = [Finding("connected", False, f"run `vera connect {name}` first")]
            continue
        approval = approved.get(name)
        if approval is None:
            report[name] = [Finding("connected on this machine", False,
                                    f"{RECORD_PATH} names {name}, but you never approved a "
                                    f"setup in this checkout: review it with `vera connect "
                                    f"{name}`")]
            continue
        effective, _ = apply_overrides(load_contract(), approval.overrides)
        rendering = render_setup(root, name, effective, api_url=approval.api_url,
                                 mcp_url=approval.mcp_url,
                                 authenticated=approval.authenticated)
        adapter = ADAPTERS[name]
        findings = [_record_finding(name, connection, approval, effective),
                    *_files(root, rendering, adapter), *_hook_finding(root, rendering)]
        findings.append(Finding("vera approval", True, ADAPTERS[name].APPROVAL))
        findings.append(_scopes_finding(root, adapter, env))
        token = None
        if approval.authenticated:
            credential, token = _credential_findings(root, name, approval,
                                                     save_mode(effective), env)
            findings += credential
            if token is None:  # the runtime would send it where a tracked file says
                report[name] = findings
                continue
        findings += ADAPTERS[name].probe(root, env, run_cli, Finding)
        if approval.credential == RUNTIME_OAUTH:
            # The token is in the runtime's own store, which doctor cannot read: what it can
            # check is the identity provider the runtime signs in with.
            findings.append(_sign_in_finding(name, approval))
        else:
            findings.append(_tools_finding(approval.mcp_url, token))
        report[name] = findings
    return report
