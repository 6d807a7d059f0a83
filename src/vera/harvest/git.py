"""A git checkout read at a commit from its object database, never from the work tree.

Only git's plumbing runs (``rev-parse``, ``ls-tree``, ``cat-file``, ``rev-list``), none of
which runs hooks, filters, textconv drivers or an fsmonitor, so a harvest executes nothing
the repository brings, and a dirty or half-checked-out work tree cannot change what it
reads. Symbolic links and submodules are listed by git as such and never read: nothing
outside the repository's own blobs is ever opened.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from vera.repository_identity import canonicalize

GIT_TIMEOUT_SECONDS = 120.0
# Plumbing only; these settings make sure nothing a repository's config names is run.
_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
         "-c", "protocol.allow=never")
_REGULAR_FILE_MODES = ("100644", "100755")


class GitError(Exception):
    """The path is no git checkout, or git failed; the message says which and why."""


@dataclass(frozen=True)
class TreeEntry:
    path: str
    object_id: str


@dataclass(frozen=True)
class Commit:
    id: str
    committed_at: datetime


class Checkout:
    """One repository on disk, read through git's object database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        top = self._git("rev-parse", "--show-toplevel").strip()
        if not top:
            raise GitError(f"{path}: not inside a git work tree")
        self.root = Path(top)

    def _git(self, *args: str, stdin: bytes | None = None) -> str:
        return self._git_bytes(*args, stdin=stdin).decode("utf-8", "replace")

    def _git_bytes(self, *args: str, stdin: bytes | None = None) -> bytes:
        try:
            done = subprocess.run(["git", *_SAFE, "-C", str(self.path), *args], input=stdin,
                                  capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False)
        except FileNotFoundError:
            raise GitError("git is not installed") from None
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} took longer than {GIT_TIMEOUT_SECONDS:.0f} s") from None
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GitError(f"git {args[0]}: {detail[-1] if detail else 'failed'}")
        return done.stdout

    def commit(self, revision: str = "HEAD") -> Commit:
        out = self._git("show", "-s", "--format=%H %cI", f"{revision}^{{commit}}", "--")
        commit_id, _, when = out.strip().partition(" ")
        return Commit(commit_id, datetime.fromisoformat(when))

    def branch(self) -> str:
        """The checked-out branch, or "" on a detached HEAD."""
        try:
            return self._git("symbolic-ref", "-q", "--short", "HEAD").strip()
        except GitError:
            return ""

    def remote_identity(self) -> str | None:
        """The canonical identity (``vera.repository_identity``) of ``origin``, else of the
        first remote with one; None when no remote names a host."""
        try:
            names = self._git("remote").split()
        except GitError:
            return None
        for name in sorted(names, key=lambda n: n != "origin"):
            try:
                url = self._git("remote", "get-url", name).strip()
            except GitError:
                continue
            identity = canonicalize(url)
            if identity:
                return identity
        return None

    def commits_between(self, since: str, until: str = "HEAD") -> list[Commit]:
        """The first-parent commits after ``since`` up to ``until``, oldest first."""
        out = self._git("rev-list", "--first-parent", "--reverse", "--format=%H %cI",
                        f"{since}..{until}", "--")
        commits = []
        for line in out.splitlines():
            if line.startswith("commit "):
                continue
            commit_id, _, when = line.strip().partition(" ")
            if commit_id:
                commits.append(Commit(commit_id, datetime.fromisoformat(when)))
        return commits

    def files(self, commit: str) -> list[TreeEntry]:
        """The regular files of the commit's tree (no symlinks, no submodules). Only trees
        are read, so a partial or sparse clone lists the files whose content it lacks."""
        out = self._git_bytes("ls-tree", "-r", "-z", "--full-tree", commit)
        entries = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, kind, object_id = meta.split()
            if kind != b"blob" or mode.decode() not in _REGULAR_FILE_MODES:
                continue
            try:
                name = path.decode("utf-8")
            except UnicodeDecodeError:
                continue  # a path no fact could name
            entries.append(TreeEntry(name, object_id.decode()))
        return entries

    def sizes(self, entries: Iterable[TreeEntry]) -> dict[str, int]:
        """Each entry's size by object id, asked of git without reading the content.

        A file whose content this clone lacks stops the caller: read as absent, its facts
        would be closed as vanished and its cited lines reported gone."""
        wanted = list(entries)
        if not wanted:
            return {}
        by_id = {e.object_id: e.path for e in wanted}
        request = "".join(f"{oid}\n" for oid in by_id).encode()
        try:
            out = self._git("cat-file", "--batch-check", stdin=request)
        except GitError as exc:  # a partial clone: git may not fetch (protocol.allow=never)
            if "promisor" not in str(exc):
                raise
            lacking = next((oid for oid in by_id if oid in str(exc)), None)
            raise _lacking(by_id[lacking] if lacking else None) from None
        sizes: dict[str, int] = {}
        for line in out.splitlines():
            object_id, _, rest = line.partition(" ")
            kind, _, size = rest.partition(" ")
            if kind != "blob" or not size.isdigit():
                raise _lacking(by_id.get(object_id))
            sizes[object_id] = int(size)
        return sizes

    def read_blobs(self, entries: Iterable[TreeEntry]) -> Iterator[tuple[TreeEntry, bytes]]:
        """Each entry's content, read in one ``git cat-file --batch``."""
        wanted = list(entries)
        if not wanted:
            return
        request = "".join(f"{e.object_id}\n" for e in wanted).encode()
        out = self._git_bytes("cat-file", "--batch", stdin=request)
        offset = 0
        for entry in wanted:
            header_end = out.index(b"\n", offset)
            header = out[offset:header_end].split()
            if len(header) != 3 or header[1] != b"blob":
                raise _lacking(entry.path)
            size = int(header[2])
            body_start = header_end + 1
            yield entry, out[body_start:body_start + size]
            offset = body_start + size + 1  # the newline after each object


def _lacking(path: str | None) -> GitError:
    where = f" ({path})" if path else ""
    return GitError(f"this clone lacks the content of a file the harvest reads{where}: a "
                    "partial clone fetches files only when checked out; check the revision "
                    "out once with every path (after `git sparse-checkout disable` in a "
                    "sparse clone), or clone without --filter")
