"""``vera connect <runtime>``: the GUIDE's setup protocol for one runtime in one project.

Validate the two URLs, plan the smallest structured merge of the runtime's artifacts into
the project's own files (reusing an equivalent ``vera`` server, stopping on a conflicting
one), show the exact diff, write it after approval, parse every changed file back and
record what VERA owns. A reconnect (a newer contract, another save mode) first takes back
VERA's unchanged content, so an update never duplicates or strands anything.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from vera.integrations import artifacts, editors
from vera.integrations.contract import apply_overrides, load_contract
from vera.integrations.disconnect import drop_credentials, undo_connection, uses_shared_credential
from vera.integrations.editors import UnsafeEdit, fingerprint, text_fingerprint
from vera.integrations.ownership import (
    IGNORE_PATH,
    IGNORE_TEXT,
    RECORD_PATH,
    Connection,
    Entry,
    EntryKind,
    credential_files,
    parse_record,
    render_record,
)
from vera.integrations.runtimes import ADAPTERS
from vera.integrations.workspace import Workspace


@dataclass
class Plan:
    runtime: str
    workspace: Workspace
    connection: Connection
    conflicts: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)  # patches to apply by hand

    @property
    def blocked(self) -> bool:
        return bool(self.conflicts or self.manual)


def _deep_merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)


class _Merger:
    """Merges one file's wanted mapping into its text, recording what it adds."""

    def __init__(self, plan: Plan, rel: str, toml: bool, adapter: ModuleType,
                 server: dict[str, Any] | None) -> None:
        self.plan, self.rel, self.toml = plan, rel, toml
        self.adapter, self.server = adapter, server
        self.text = plan.workspace.read(rel) or ""

    def parsed(self) -> Any:
        return editors.parse_toml(self.text) if self.toml else editors.parse_json(self.text)

    def record(self, kind: EntryKind, path: tuple[str, ...], value: Any) -> None:
        self.plan.connection.entries.append(Entry(self.rel, kind, fingerprint(value), path))

    def add(self, path: tuple[str, ...], value: Any) -> None:
        if self.toml:
            if isinstance(value, dict):
                self.text, owned = editors.toml_set_table(self.text, path, value)
            else:
                self.text, owned = editors.toml_set_key(self.text, path, value), path
            kind: EntryKind = "toml-key"
        else:
            self.text, owned = editors.json_set(self.text, path, value)
            kind = "json-key"
        self.record(kind, owned, editors.get_path(self.parsed(), owned))

    def merge(self, path: tuple[str, ...], wanted: Any) -> None:
        existing = editors.get_path(self.parsed(), path) if path else self.parsed()
        where = f"{self.rel} {'.'.join(path)}"
        if path == self.adapter.SERVER_PATH and self.server is not None:
            if existing is None:
                return self.add(path, wanted)
            if not self.adapter.equivalent(existing, self.server):
                self.plan.conflicts.append(
                    f"{where}: a different vera server is already defined (another "
                    "endpoint or auth); choose: remove or edit it, or connect with its URL")
                return None
            rest = {k: v for k, v in wanted.items() if k not in self.server}
            for key, value in rest.items():  # an equivalent server is reused as it is
                self.merge((*path, key), value)
            return None
        if existing is None:
            return self.add(path, wanted)
        if isinstance(wanted, Mapping):
            if not isinstance(existing, dict):
                self.plan.conflicts.append(f"{where}: expected an object")
                return None
            for key, value in wanted.items():
                self.merge((*path, key), value)
            return None
        if isinstance(wanted, list) and not self.toml:
            if not isinstance(existing, list):
                self.plan.conflicts.append(f"{where}: expected an array")
                return None
            for item in wanted:
                if item not in editors.get_path(self.parsed(), path):
                    self.text = editors.json_append(self.text, path, item)
                    self.record("json-item", path, item)
            return None
        if existing != wanted and not self.adapter.serves_as_is(path, existing):
            self.plan.conflicts.append(f"{where}: already set to another value; choose which "
                                       "to keep")
        return None


def _file(plan: Plan, rel: str, content: str, connections: dict[str, Connection]) -> None:
    ws = plan.workspace
    entry = Entry(rel, "file", text_fingerprint(content))
    current = ws.read(rel)
    if current is None:
        ws.write(rel, content)
    elif current != content:
        if not _take_over(rel, current, connections):
            plan.conflicts.append(f"{rel}: a different file is already there; move it away "
                                  "or merge it by hand")
            return
        ws.write(rel, content)
    elif not any(entry in c.entries for c in connections.values()):
        return  # the user's own identical file: reused, not VERA's to remove later
    plan.connection.entries.append(entry)


def _take_over(rel: str, current: str, connections: dict[str, Connection]) -> bool:
    """Whether ``rel`` is VERA's unchanged file recorded by other runtimes only, which this
    connect may then replace: the shared layout's ``.agents/skills/vera/SKILL.md``, which
    Codex and OpenCode both recorded before each runtime had its own files. The others
    stop owning it; each gets its own file at its next connect (doctor says so)."""
    theirs = Entry(rel, "file", text_fingerprint(current))
    owners = [c for c in connections.values() if theirs in c.entries]
    for connection in owners:
        connection.entries.remove(theirs)
    return bool(owners)


@dataclass(frozen=True)
class Rendering:
    """What the installed VERA puts in a project for one runtime: whole files, and per
    config file (``toml``, mapping) the mapping merged into it; ``server`` is the ``vera``
    server definition at ``mcp_file``'s ``SERVER_PATH``."""

    files: list[artifacts.Artifact]
    merges: dict[str, tuple[bool, dict[str, Any]]]
    mcp_file: str
    server: dict[str, Any]


def render_setup(root: Path, runtime: str, effective: Mapping[str, Any], *, api_url: str,
                 mcp_url: str, authenticated: bool) -> Rendering:
    adapter = ADAPTERS[runtime]
    server = adapter.server_definition(mcp_url, authenticated)
    mcp_rel = adapter.mcp_file(root)
    merges: dict[str, tuple[bool, dict[str, Any]]] = {
        mcp_rel: (mcp_rel.endswith(".toml"), {
            **copy.deepcopy(adapter.CONFIG_KEYS),
            **_nest(adapter.SERVER_PATH, copy.deepcopy(server))})}
    files = []
    for artifact in artifacts.render(runtime, effective, api_url=api_url):
        if artifact.kind == "file":
            files.append(artifact)
            continue
        rel = mcp_rel if artifact.path in ("opencode.json", "opencode.jsonc") else artifact.path
        _deep_merge(merges.setdefault(rel, (artifact.kind == "toml-merge", {}))[1],
                    artifact.content)  # type: ignore[arg-type]
    return Rendering(files, merges, mcp_rel, server)


def plan_connect(root: Path, runtime: str, api_url: str, mcp_url: str, *,
                 authenticated: bool, credential: str,
                 overrides: Mapping[str, str]) -> Plan:
    adapter = ADAPTERS[runtime]
    effective, reviewed = apply_overrides(load_contract(), overrides)
    ws = Workspace(root)
    connections = parse_record(ws.read(RECORD_PATH))
    connection = Connection(api_url, mcp_url, effective, reviewed, credential)
    plan = Plan(runtime, ws, connection)
    if runtime in connections:
        removal = undo_connection(ws, runtime, connections)
        if removal.conflicts:
            plan.conflicts.extend(f"{c} (from the earlier connect)" for c in removal.conflicts)
            return plan
        connections = {n: c for n, c in connections.items() if n != runtime}

    if not authenticated:
        drop_credentials(ws, runtime)  # a token kept from an earlier connect is not sent now
    rendering = render_setup(root, runtime, effective, api_url=api_url, mcp_url=mcp_url,
                             authenticated=authenticated)
    server, mcp_rel, wanted = rendering.server, rendering.mcp_file, rendering.merges
    if ws.read(mcp_rel) is None:
        toml, mapping = wanted[mcp_rel]
        wanted[mcp_rel] = (toml, {**adapter.NEW_FILE_KEYS, **mapping})
    for artifact in rendering.files:
        _file(plan, artifact.path, str(artifact.content), connections)
    for rel, (toml, data) in wanted.items():
        created = ws.read(rel) is None
        try:
            merger = _Merger(plan, rel, toml, adapter, server if rel == mcp_rel else None)
            merger.merge((), data)
        except UnsafeEdit as exc:
            plan.manual.append(f"{rel}: {exc}. Apply by hand:\n{_patch(toml, data)}")
            continue
        ws.write(rel, merger.text)
        if created:
            connection.created_files.append(rel)
    if authenticated:
        ws.write(IGNORE_PATH, IGNORE_TEXT)
    connections[runtime] = connection
    if not uses_shared_credential(connections):
        drop_credentials(ws, None)  # the shared layout's token: no runtime sends it now
    ws.write(RECORD_PATH, render_record(connections))
    return plan


def store_token(plan: Plan, token: str) -> None:
    """The MCP JWT goes only to the runtime's own untracked, owner-only credential files,
    next to the endpoint it was minted for."""
    ws, files = plan.workspace, credential_files(plan.runtime)
    ws.write(files.token, token)  # bare: OpenCode substitutes the file's whole text
    ws.write(files.headers, json.dumps({"Authorization": f"Bearer {token}"}) + "\n")
    ws.write(files.minted_for, plan.connection.mcp_url + "\n")
    ws.write(IGNORE_PATH, IGNORE_TEXT)


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    for key in reversed(path):
        value = {key: value}
    return value


def _patch(toml: bool, data: dict[str, Any]) -> str:
    import tomlkit

    return tomlkit.dumps(data) if toml else json.dumps(data, indent=2)
