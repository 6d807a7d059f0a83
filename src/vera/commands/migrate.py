"""`vera migrate [SERVICE]`: every service's SQL migrations, or one service's (signed in as
that service's own database role, the only login that may change its schema), on the
configured database or the embedded one."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from vera.commands import SERVICE_NAMES, Subcommands, settings_at


def add_parser(commands: Subcommands) -> None:
    migrate = commands.add_parser("migrate", help="apply every service's SQL migrations, "
                                  "or one service's")
    migrate.add_argument("service", nargs="?", choices=SERVICE_NAMES,
                         help="only this service's schema (default: all four)")
    migrate.add_argument("--data-dir", type=Path, help="embedded PostgreSQL data dir "
                         "(ignored when VERA_DATABASE__DSN is set)")


async def _migrate_schemas(dsn: str, services: tuple[str, ...]) -> None:
    from vera.db.migrate import migrate

    for name in services:
        applied = await migrate(dsn, name, f"vera.services.{name}")
        print(f"{name}: {len(applied)} migration(s) applied")


def main(args: argparse.Namespace) -> int:
    settings = settings_at(args.data_dir)
    services = (args.service,) if args.service else SERVICE_NAMES
    if settings.database.dsn is not None:
        asyncio.run(_migrate_schemas(settings.database.dsn.get_secret_value(), services))
        return 0
    from vera.db.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(settings.data_dir.expanduser())

    async def with_embedded() -> None:
        await _migrate_schemas(await pg.ensure_database(), services)

    pg.start()
    try:
        asyncio.run(with_embedded())
    finally:
        pg.stop()
    return 0
