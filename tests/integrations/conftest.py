"""Fixtures for the integration kit: a fresh Git repository, an isolated user home, the
pinned runtime CLIs (installed once per run by scripts/runtimes) and `vera` as a process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def runtime_bin() -> Path:
    """The folder holding claude, codex and opencode at the pinned versions."""
    done = subprocess.run([str(CHECKOUT / "scripts" / "runtimes")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    return root.resolve()


@pytest.fixture
def home_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose user home and runtime homes are empty temp folders."""
    home = tmp_path / "home"
    for sub in ("", ".codex", "config", "data", "cache", "state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VERA_", "CLAUDE", "CODEX", "OPENCODE", "XDG_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"),
               XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
               XDG_CACHE_HOME=str(home / "cache"), XDG_STATE_HOME=str(home / "state"),
               OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1",
               DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    return env


Vera = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def vera(repo: Path, home_env: dict[str, str]) -> Vera:
    def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vera.cli", *args], cwd=cwd or repo,
                              env={**home_env, **(env or {})}, input=stdin,
                              capture_output=True, text=True, timeout=180)
    return run


# A managed policy that blocks hooks or MCP. Claude Code reads its managed settings only from
# /etc/claude-code; the test gives the runtime a private /etc (a copy, bind-mounted in its own
# user and mount namespace) so nothing outside the sandbox is written.

def _can_unshare() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.fixture
def managed_etc(tmp_path: Path) -> Path:
    if not _can_unshare():
        pytest.skip("needs unprivileged user and mount namespaces (unshare -rm)")
    etc = tmp_path / "etc"
    shutil.copytree("/etc", etc, symlinks=True, ignore_dangling_symlinks=True,
                    copy_function=_copy_readable, dirs_exist_ok=True)
    (etc / "claude-code").mkdir(exist_ok=True)
    return etc


def _copy_readable(src: str, dst: str) -> None:
    try:
        shutil.copy2(src, dst)
    except OSError:
        pass  # files only root may read are not needed by the runtimes
