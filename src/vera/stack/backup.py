"""Backups of a `vera up` deployment, and their restore into an empty data dir.

A backup is an owner-only directory:

- ``vera.pgdump``: the database, in pg_dump's custom format, taken with the embedded
  server's own pg_dump (the system's refuses a newer server) while the stack serves. It
  reads one snapshot, so facts, proposals, keys and history are consistent with each other
  however much the stack writes meanwhile.
- ``local.secret``: the data dir's secret (``vera.local_secret``): the database's password,
  the local API's credential, the key local MCP tokens are derived from. Owner-only, like
  the backup: whoever reads a backup reads the team's data anyway.
- ``profile.json``: the profile the deployment is served in (``vera.stack.profile``), so a
  restored team deployment is never served in local mode by accident either.
- ``manifest.json``: what the backup holds: its format, the release that took it, when, and
  each schema's applied migrations.

What is left out is rebuilt: the retrieval service refills its index from the database
when it starts, `vera up` writes the run files, the model weights download again (or come
from ``VERA_RETRIEVAL__MODEL_CACHE_DIR``). A backup from an older release restores and is
migrated by the newer `vera up` on start.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
from pathlib import Path

from vera import SERVER_VERSION
from vera.stack import StackError
from vera.stack.profile import PROFILE_FILE
from vera.stack.run_files import read_stack_file

BACKUP_FORMAT = 1
DUMP_FILE = "vera.pgdump"
MANIFEST_FILE = "manifest.json"
SECRET_FILE = "local.secret"  # vera.local_secret.FILE_NAME


def _copy_private(source: Path, target: Path) -> None:
    """Copies ``source`` to a new owner-only ``target``."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(source.read_bytes())


def _empty_or_missing(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


async def _applied_migrations(dsn: str) -> dict[str, list[str]]:
    import asyncpg  # the [server] extra, as the embedded server's

    conn = await asyncpg.connect(dsn)
    try:
        schemas = [row["table_schema"] for row in await conn.fetch(
            "SELECT table_schema FROM information_schema.tables "
            "WHERE table_name = 'schema_migrations' ORDER BY table_schema")]
        return {schema: [row["version"] for row in await conn.fetch(
            f'SELECT version FROM "{schema}".schema_migrations ORDER BY version')]
            for schema in schemas}
    finally:
        await conn.close()


def backup(data_dir: Path, dest: Path) -> dict:
    """Backs up the deployment in ``data_dir`` (serving or stopped) into ``dest``, a new or
    empty directory; returns the manifest. StackError names what is wrong."""
    from vera.db.embedded import EmbeddedPostgres

    data_dir, dest = data_dir.expanduser().resolve(), dest.expanduser().resolve()
    if not (data_dir / "postgres").is_dir() or not (data_dir / SECRET_FILE).is_file():
        raise StackError(f"{data_dir} holds no VERA deployment (no postgres/ and "
                         f"{SECRET_FILE}): pass the deployment's --data-dir")
    if not _empty_or_missing(dest):
        raise StackError(f"{dest} is not empty: back up into a new directory")
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(dest, 0o700)
    serving = read_stack_file(data_dir) is not None
    pg = EmbeddedPostgres(data_dir)
    pg.start()  # a serving stack's server is attached to, not started again
    try:
        pg.dump(dest / DUMP_FILE)
        migrations = asyncio.run(_applied_migrations(pg.dsn()))
    finally:
        if not serving:
            pg.stop()
    _copy_private(data_dir / SECRET_FILE, dest / SECRET_FILE)
    if (data_dir / PROFILE_FILE).is_file():
        _copy_private(data_dir / PROFILE_FILE, dest / PROFILE_FILE)
    manifest = {"format": BACKUP_FORMAT, "release": SERVER_VERSION,
                "taken_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "while_serving": serving, "database": DUMP_FILE, "migrations": migrations}
    (dest / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def read_manifest(source: Path) -> dict:
    try:
        manifest = json.loads((source / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        raise StackError(f"{source} is not a VERA backup (no readable {MANIFEST_FILE})"
                         ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise StackError(f"{source}: backup format {manifest.get('format')!r} is not "
                         f"{BACKUP_FORMAT}; restore it with the release that took it")
    for name in (DUMP_FILE, SECRET_FILE):
        if not (source / name).is_file():
            raise StackError(f"{source}: {name} is missing; the backup is incomplete")
    return manifest


def restore(source: Path, data_dir: Path) -> dict:
    """Restores the backup in ``source`` into ``data_dir``, which must be new or empty (a
    restore never merges into a deployment); returns the backup's manifest. `vera up` on
    ``data_dir`` then serves it (with the deployment's variables)."""
    from vera.db.embedded import EmbeddedPostgres

    source, data_dir = source.expanduser().resolve(), data_dir.expanduser().resolve()
    manifest = read_manifest(source)
    if not _empty_or_missing(data_dir):
        raise StackError(f"{data_dir} is not empty: restore into a new data dir")
    # As `vera up` makes it: under root the embedded server runs as its own user, which
    # must reach postgres/ inside.
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        _copy_private(source / SECRET_FILE, data_dir / SECRET_FILE)
        if (source / PROFILE_FILE).is_file():
            _copy_private(source / PROFILE_FILE, data_dir / PROFILE_FILE)
        pg = EmbeddedPostgres(data_dir)
        pg.start()  # a new server, locked with the deployment's secret
        try:
            asyncio.run(pg.ensure_database())
            pg.restore(source / DUMP_FILE)
        finally:
            pg.stop()
    except BaseException:
        # Half a restore is no deployment: leave the data dir as empty as it was found.
        for child in data_dir.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise
    return manifest
