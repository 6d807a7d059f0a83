"""A project's files as connect and disconnect see them: read once, changed in memory,
shown as one exact diff, and written only after approval.

Nothing is ever written through a symbolic link, and no link is created.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from pathlib import Path

from vera.integrations.editors import UnsafeEdit, parse_json, parse_toml
from vera.integrations.ownership import confined, is_credential_file


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._original: dict[str, str | None] = {}
        self._current: dict[str, str | None] = {}

    def _path(self, rel: str) -> Path:
        path = self.root / confined(rel)
        probe = path
        while probe != self.root:
            if probe.is_symlink():
                raise UnsafeEdit(f"{rel} goes through a symbolic link; VERA does not write "
                                 "through links")
            probe = probe.parent
        return path

    def read(self, rel: str) -> str | None:
        if rel not in self._current:
            path = self._path(rel)
            if path.exists() and not path.is_file():
                raise UnsafeEdit(f"{rel} is not a regular file; VERA reads only files")
            text = path.read_text() if path.is_file() else None
            self._original[rel] = self._current[rel] = text
        return self._current[rel]

    def write(self, rel: str, text: str | None) -> None:
        self.read(rel)
        self._current[rel] = text

    def changed(self) -> list[str]:
        return sorted(rel for rel, text in self._current.items()
                      if text != self._original[rel])

    def diff(self) -> str:
        chunks = []
        for rel in self.changed():
            if is_credential_file(rel):
                chunks.append(f"--- {rel} (credential, written untracked; not shown)\n")
                continue
            old, new = self._original[rel], self._current[rel]
            chunks.append("".join(difflib.unified_diff(
                (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                fromfile=f"a/{rel}" if old is not None else "/dev/null",
                tofile=f"b/{rel}" if new is not None else "/dev/null")))
        return "".join(chunk if chunk.endswith("\n") else chunk + "\n" for chunk in chunks)

    def apply(self) -> list[str]:
        """Writes every change; returns the changed paths."""
        changed = self.changed()
        for rel in changed:
            path = self._path(rel)
            text = self._current[rel]
            if text is None:
                path.unlink(missing_ok=True)
                self._prune(path.parent)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if is_credential_file(rel):
                write_private(path, text)
            else:
                path.write_text(text)
        return changed

    def _prune(self, folder: Path) -> None:
        while folder != self.root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


def write_private(path: Path, text: str) -> None:
    """Owner-only on every write, an existing file's looser mode included."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def parse_back(root: Path, rel: str) -> str | None:
    """Parses one written file by its real format; returns the failure, or None."""
    path = root / rel
    if not path.exists():
        return None
    text = path.read_text()
    try:
        if rel.endswith((".json", ".jsonc")):
            parse_json(text)
        elif rel.endswith(".toml"):
            parse_toml(text)
        elif rel.endswith(".py"):
            compile(text, rel, "exec")
        elif rel.endswith((".js", ".cjs", ".mjs")) and shutil.which("node"):
            checked = subprocess.run(["node", "--check", str(path)], capture_output=True,
                                     text=True, timeout=30)
            if checked.returncode != 0:
                return checked.stderr.strip().splitlines()[0] if checked.stderr else "invalid"
    except (UnsafeEdit, SyntaxError) as exc:
        return str(exc)
    return None


def tracked(root: Path, rels: list[str]) -> list[str]:
    """Which of ``rels`` Git tracks in ``root``: a secret written there would be committed."""
    listed = subprocess.run(["git", "ls-files", "--", *rels], cwd=root, capture_output=True,
                            text=True)
    return listed.stdout.split()
