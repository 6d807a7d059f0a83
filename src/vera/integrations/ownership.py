"""The ownership record: exactly which files, keys and blocks ``vera connect`` wrote, with
their hashes, per runtime, next to the contract and reviewed overrides in force.

It lives in the project at ``.vera/integrations.json`` (tracked, no secrets), so whoever
runs ``vera disconnect`` later removes what VERA wrote and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

RECORD_PATH = ".vera/integrations.json"
# The user's own untracked credential state, each file owner-only (0600), one folder per
# connected runtime so that one runtime's connect never changes another's rights: the MCP
# token as the runtime's own secret mechanism reads it (OpenCode substitutes the bare token,
# the headers helpers of Claude Code and Codex print the header object), and the endpoint
# the token was minted for, which no tracked file can redirect.
CREDENTIAL_NAMES = ("mcp-token", "mcp-headers.json", "mcp-token-endpoint")
IGNORE_PATH = ".vera/.gitignore"
IGNORE_TEXT = ("# VERA keeps credentials here; never commit them.\n"
               + "".join(f"{name}\n" for name in sorted(CREDENTIAL_NAMES)))


@dataclass(frozen=True)
class CredentialFiles:
    token: str
    headers: str
    minted_for: str

    @property
    def paths(self) -> tuple[str, str, str]:
        return (self.token, self.headers, self.minted_for)

    @property
    def label(self) -> str:
        """The record's credential label for a static token kept in these files."""
        return f"file:{self.token}"


def credential_files(runtime: str | None) -> CredentialFiles:
    """``runtime``'s credential files; ``None``: the shared layout every runtime of a
    checkout used before each had its own, kept only to migrate it (:data:`SHARED`)."""
    folder = ".vera" if runtime is None else f".vera/{runtime}"
    return CredentialFiles(*(f"{folder}/{name}" for name in CREDENTIAL_NAMES))


SHARED = credential_files(None)


def is_credential_file(rel: str) -> bool:
    path = PurePosixPath(rel)
    return path.name in CREDENTIAL_NAMES and PurePosixPath(".vera") in (
        path.parent, path.parent.parent)


EntryKind = Literal["file", "json-key", "json-item", "toml-key"]


# The record's credential for a runtime that signs in through the deployment's identity
# provider itself (its token stays in the runtime's own store).
RUNTIME_OAUTH = "runtime-oauth"


class BadRecord(ValueError):
    """The ownership record names a path outside the repository or is malformed."""


def confined(rel: object) -> str:
    """``rel`` as a plain relative path inside the repository; :class:`BadRecord` otherwise.

    The record is tracked, so anyone with a commit can edit it: a path it names must not
    reach (or, through ``..``, climb) outside the repository. Links are refused where
    files are touched (:class:`vera.integrations.workspace.Workspace`).
    """
    if not isinstance(rel, str) or not rel:
        raise BadRecord(f"{RECORD_PATH}: a path must be a non-empty string")
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise BadRecord(f"{RECORD_PATH}: {rel!r} is not a path inside the repository")
    return rel


@dataclass(frozen=True)
class Entry:
    """One thing VERA wrote: a whole file, an object key, an array item or a TOML key."""

    file: str
    kind: EntryKind
    sha256: str
    path: tuple[str, ...] = ()

    def describe(self) -> str:
        where = ".".join(self.path)
        item = " []" if self.kind == "json-item" else ""
        return f"{self.file}{' ' + where if where else ''}{item}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = list(self.path)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        return cls(file=confined(data["file"]), kind=data["kind"], sha256=data["sha256"],
                   path=tuple(data.get("path") or ()))


@dataclass
class Connection:
    api_url: str
    mcp_url: str
    contract: dict[str, Any]
    overrides: dict[str, str]
    credential: str  # "none", "runtime-oauth" or "file:<path>"; never the secret itself
    entries: list[Entry] = field(default_factory=list)
    created_files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"api_url": self.api_url, "mcp_url": self.mcp_url, "contract": self.contract,
                "overrides": self.overrides, "credential": self.credential,
                "entries": [e.to_json() for e in self.entries],
                "created_files": sorted(self.created_files)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Connection:
        return cls(api_url=data["api_url"], mcp_url=data["mcp_url"], contract=data["contract"],
                   overrides=dict(data.get("overrides") or {}), credential=data["credential"],
                   entries=[Entry.from_json(e) for e in data.get("entries") or ()],
                   created_files=[confined(rel) for rel in data.get("created_files") or ()])


def parse_record(text: str | None) -> dict[str, Connection]:
    if not text:
        return {}
    try:
        data = json.loads(text)
        return {name: Connection.from_json(c)
                for name, c in (data.get("runtimes") or {}).items()}
    except BadRecord:
        raise
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise BadRecord(f"{RECORD_PATH} is malformed ({type(exc).__name__}); restore it "
                        "from Git") from None


def render_record(connections: dict[str, Connection]) -> str:
    return json.dumps({"runtimes": {name: c.to_json() for name, c in sorted(connections.items())}},
                      indent=2) + "\n"


def shared_elsewhere(entry: Entry, runtime: str, connections: dict[str, Connection]) -> bool:
    """Whether another connected runtime owns the same content (the shared layout's
    ``.agents/skills/vera``, which Codex and OpenCode both recorded)."""
    return any(entry in c.entries for name, c in connections.items() if name != runtime)


def read_record(root: Path) -> dict[str, Connection]:
    path = root / RECORD_PATH
    return parse_record(path.read_text() if path.exists() else None)
