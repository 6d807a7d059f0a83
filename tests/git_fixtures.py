"""Git repositories tests build: a real repository in a temporary folder, with commits
made by the test (fixed dates, so facts' times are known)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REMOTE = "https://github.com/acme/shop.git"
IDENTITY = "github.com/acme/shop"


class FixtureRepo:
    def __init__(self, root: Path, remote: str | None = REMOTE) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        if remote:
            self.git("remote", "add", "origin", remote)
        self.commits = 0

    def git(self, *args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, env=env,
                              capture_output=True, text=True).stdout

    def write(self, files: dict[str, str | None]) -> None:
        """Writes (or, for None, deletes) files in the work tree."""
        for path, text in files.items():
            target = self.root / path
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def commit(self, files: dict[str, str | None], when: str | None = None) -> str:
        """Writes the files, commits everything; the commit's time is ``when`` (ISO-8601),
        by default one day later per commit from 2026-01-01."""
        self.write(files)
        self.commits += 1
        when = when or f"2026-01-{self.commits:02d}T12:00:00+00:00"
        self.git("add", "-A")
        env_date = ["-c", "user.name=t"]
        subprocess.run(["git", *env_date, "-C", str(self.root), "commit", "-q", "-m",
                        f"commit {self.commits}", "--allow-empty"], check=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.org",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.org",
                            "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when},
                       capture_output=True)
        return self.git("rev-parse", "HEAD").strip()
