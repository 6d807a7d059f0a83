"""The data dir's secret: what local mode asks of anyone reaching the stack of a data dir,
so another user of the same machine is not its administrator.

One owner-only file (0600), ``<data-dir>/local.secret``, made on first use (`vera up`,
`vera migrate`). It is the password of the embedded PostgreSQL (scram, never trust:
``vera.db.embedded``) and the REST API's credential in the local-dev profile (``Bearer``,
``vera.api.auth``); `vera` commands read it themselves (``vera.api_client``), so the
developer never types it. The MCP gateway never holds it: local MCP tokens are signed with
a key derived from it (``local_token_key``), which `vera up` passes to the gateway alone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

FILE_NAME = "local.secret"
# HKDF's info: what the derived key is for, so no other use of the secret shares it.
TOKEN_KEY_INFO = b"vera local mcp token key v1"


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


def local_token_key(secret: str) -> str:
    """The key local MCP tokens are signed with (hex): HKDF-SHA256 (RFC 5869) of the data
    dir's secret, no salt, ``TOKEN_KEY_INFO``, 32 bytes. The gateway verifies with it and
    cannot recover the secret (the database's superuser password) from it."""
    pseudo_random_key = hmac.new(bytes(32), secret.encode(), hashlib.sha256).digest()
    return hmac.new(pseudo_random_key, TOKEN_KEY_INFO + b"\x01", hashlib.sha256).hexdigest()
