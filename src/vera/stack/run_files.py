"""Where a running stack says where it is: ``<data-dir>/run/stack.json`` (every child's
address, pid and restart count) and ``<data-dir>/run/rpc.key`` (the internal call key,
owner-only), written by `vera up` and read by the client commands."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import SecretStr

from vera.config import Settings


def stack_file(data_dir: Path) -> Path:
    return data_dir / "run" / "stack.json"


def key_file(data_dir: Path) -> Path:
    return data_dir / "run" / "rpc.key"


def write_key_file(data_dir: Path, key: str) -> None:
    path = key_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # an older file keeps its mode otherwise
        out.write(key)

def write_stack_file(data_dir: Path, info: dict) -> None:
    """Replaces the file in one rename: a reader never sees half of it."""
    path = stack_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    # Owner-only: console_url carries the local console's sign-in token.
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(json.dumps(info, indent=2))
    os.replace(partial, path)

def read_stack_file(data_dir: Path) -> dict | None:
    """The running stack's addresses and pids, or None when no live stack uses this data
    dir."""
    path = stack_file(data_dir)
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(int(info["pid"]), 0)
    except (OSError, KeyError, ValueError):
        return None
    return info

def stack_client_settings(settings: Settings, data_dir: Path) -> Settings:
    """``settings`` for a client of the stack running on ``data_dir``: its service
    addresses and its internal key; unchanged when no stack runs there."""
    data_dir = data_dir.expanduser().resolve()
    stack = read_stack_file(data_dir)
    if stack is None:
        return settings
    update: dict = {"services": settings.services.model_copy(update=stack["services"])}
    try:
        key = key_file(data_dir).read_text().strip()
    except OSError:
        key = ""
    if key:
        update["rpc"] = settings.rpc.model_copy(update={"auth_key": SecretStr(key)})
    return settings.model_copy(update=update)
