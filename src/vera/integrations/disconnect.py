"""``vera disconnect <runtime>``: remove exactly what connect wrote, if it is unchanged.

A file, key or array item VERA recorded goes only while its hash still matches; one the user
edited since is reported as a conflict and kept. Content another connected runtime also owns
stays, and so do files the runtime wrote itself (OpenCode's ``.opencode/.gitignore``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vera.integrations import editors
from vera.integrations.editors import UnsafeEdit, fingerprint, text_fingerprint
from vera.integrations.ownership import (
    IGNORE_PATH,
    RECORD_PATH,
    SHARED,
    Connection,
    Entry,
    credential_files,
    render_record,
    shared_elsewhere,
)
from vera.integrations.workspace import Workspace


@dataclass
class Removal:
    removed: list[Entry] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def _parsed(ws: Workspace, entry: Entry) -> object:
    text = ws.read(entry.file) or ""
    return editors.parse_toml(text) if entry.kind == "toml-key" else editors.parse_json(text)


def _undo(ws: Workspace, entry: Entry, removal: Removal) -> None:
    text = ws.read(entry.file)
    if text is None:
        return  # already gone: nothing of VERA's is left to remove
    if entry.kind == "file":
        if text_fingerprint(text) == entry.sha256:
            ws.write(entry.file, None)
            removal.removed.append(entry)
        else:
            removal.conflicts.append(f"{entry.describe()}: edited since VERA wrote it; kept")
        return
    try:
        current = editors.get_path(_parsed(ws, entry), entry.path)
        if entry.kind == "json-item":
            items = current if isinstance(current, list) else []
            if any(fingerprint(item) == entry.sha256 for item in items):
                ws.write(entry.file, editors.json_remove_item(text, entry.path, entry.sha256))
                removal.removed.append(entry)
            else:
                removal.conflicts.append(f"{entry.describe()}: VERA's item was edited or "
                                         "removed; nothing deleted")
            return
        if current is None:
            return
        if fingerprint(current) != entry.sha256:
            removal.conflicts.append(f"{entry.describe()}: edited since VERA wrote it; kept")
            return
        if entry.kind == "toml-key":
            ws.write(entry.file, editors.toml_delete(text, entry.path))
        else:
            ws.write(entry.file, editors.json_delete(text, entry.path))
        removal.removed.append(entry)
    except UnsafeEdit as exc:
        removal.conflicts.append(f"{entry.describe()}: {exc}; remove it by hand")


def _empty(text: str | None) -> bool:
    return text is not None and "".join(text.split()) in ("", "{}")


def undo_connection(ws: Workspace, runtime: str, connections: dict[str, Connection]
                    ) -> Removal:
    """Removes ``runtime``'s unchanged content from ``ws`` (in memory)."""
    connection = connections[runtime]
    removal = Removal()
    for entry in reversed(connection.entries):
        if not shared_elsewhere(entry, runtime, connections):
            _undo(ws, entry, removal)
    for rel in connection.created_files:
        others_use = any(rel in c.created_files for n, c in connections.items() if n != runtime)
        if not others_use and _empty(ws.read(rel)):
            ws.write(rel, None)  # a config file VERA created and nothing else uses
    return removal


def uses_shared_credential(connections: dict[str, Connection]) -> bool:
    """Whether a runtime still sends the shared layout's token (connected before each
    runtime had its own, and not connected again since)."""
    return any(c.credential == SHARED.label for c in connections.values())


def drop_credentials(ws: Workspace, runtime: str | None) -> None:
    for rel in credential_files(runtime).paths:
        ws.write(rel, None)


def plan_disconnect(ws: Workspace, runtime: str, connections: dict[str, Connection]
                    ) -> Removal:
    removal = undo_connection(ws, runtime, connections)
    remaining = {n: c for n, c in connections.items() if n != runtime}
    drop_credentials(ws, runtime)
    if not uses_shared_credential(remaining):
        drop_credentials(ws, None)
    if remaining:
        ws.write(RECORD_PATH, render_record(remaining))
    else:
        for rel in (RECORD_PATH, IGNORE_PATH):
            ws.write(rel, None)
    return removal
