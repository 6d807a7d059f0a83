"""The data dir's secret: what local mode asks of anyone reaching the stack of a data dir,
so another user of the same machine is not its administrator.

One owner-only file (0600), ``<data-dir>/local.secret``, made on first use (`vera up`,
`vera migrate`). It is the password of the embedded PostgreSQL (scram, never trust:
``vera.db.embedded``) and the REST API's credential in the local-dev profile (``Bearer``,
``vera.api.auth``); `vera` commands read it themselves (``vera.api_client``), so the
developer never types it.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

FILE_NAME = "local.secret"


class LocalSecretError(Exception):
    """The file is there but cannot be trusted (others may read it) or read."""


def secret_path(data_dir: Path) -> Path:
    return data_dir.expanduser().resolve() / FILE_NAME


def read_secret(data_dir: Path) -> str | None:
    """The data dir's secret, or None when it has none yet."""
    path = secret_path(data_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd) as file:
        mode = os.fstat(file.fileno()).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise LocalSecretError(
                f"{path}: readable by others (mode {stat.filemode(mode)}); remove it and "
                "start again, which makes a new one (and a new database password)"
            )
        secret = file.read().strip()
    if not secret:
        raise LocalSecretError(f"{path}: empty")
    return secret


def ensure_secret(data_dir: Path) -> str:
    """The data dir's secret, made now when it has none (two processes racing agree on
    one: the file appears whole, in one link, or not at all)."""
    existing = read_secret(data_dir)
    if existing is not None:
        return existing
    path = secret_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            # Hex: it goes into a DSN's password and a Bearer header without quoting.
            out.write(secrets.token_hex(32))
        try:
            os.link(partial, path)
        except FileExistsError:
            pass
    finally:
        partial.unlink()
    secret = read_secret(data_dir)
    assert secret is not None
    return secret
