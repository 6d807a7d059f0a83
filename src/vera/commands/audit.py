"""`vera audit verify`: checks each service's audit chain (vera.db.audit) and names the
first broken record; exit 1 when one is broken, or when a chain is shorter than the head
an operator recorded (``--expect SERVICE=COUNT:HASH``, from the exported head)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from vera.commands import Subcommands, settings_at

# The services that keep an audit chain (retrieval records no security event).
AUDITED = ("identity", "knowledge", "snapshot")


def add_parser(commands: Subcommands) -> None:
    audit = commands.add_parser("audit", help="check the audit trail's hash chains")
    actions = audit.add_subparsers(dest="action", required=True)
    verify = actions.add_parser("verify", help="verify every audit chain, naming the first "
                                "broken record")
    verify.add_argument("--data-dir", type=Path, help="embedded PostgreSQL data dir "
                        "(ignored when VERA_DATABASE__DSN is set)")
    verify.add_argument("--expect", action="append", default=[], metavar="SERVICE=COUNT:HASH",
                        help="a head exported earlier (the 'audit head' log line): the chain "
                        "must still hold that record")


def _expected(values: list[str]) -> dict[str, tuple[int, str]]:
    heads = {}
    for value in values:
        service, _, head = value.partition("=")
        count, _, digest = head.partition(":")
        if service not in AUDITED or not count.isdigit():
            raise SystemExit(f"vera audit verify: --expect {value!r}: SERVICE=COUNT:HASH with "
                             f"SERVICE one of {', '.join(AUDITED)}")
        heads[service] = (int(count), digest.lower())
    return heads


async def _verify_all(dsn: str, expected: dict[str, tuple[int, str]]) -> int:
    import asyncpg

    from vera.db import audit

    failed = 0
    for service in AUDITED:
        conn = await asyncpg.connect(dsn, server_settings={"search_path": service})
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                head, broken = await audit.verify(conn)
                if broken is None:
                    # An earlier head still in the chain: that record and its hash.
                    count, digest = expected.get(service, (0, ""))
                    if count:
                        held = await conn.fetchval(
                            "SELECT hash FROM audit_log WHERE seq = $1", count)
                        if held is None or bytes(held).hex() != digest:
                            broken = audit.Broken(count, "truncated" if held is None
                                                  else "rewritten")
        finally:
            await conn.close()
        if broken is None:
            print(f"{service}: {head.count} records, chain intact, head {head.hash or '-'}")
        else:
            failed = 1
            print(f"{service}: BROKEN at record {broken.seq} ({broken.reason}); "
                  f"intact up to record {head.count}")
    return failed


def main(args: argparse.Namespace) -> int:
    settings = settings_at(args.data_dir)
    expected = _expected(args.expect)
    if settings.database.dsn is not None:
        return asyncio.run(_verify_all(settings.database.dsn.get_secret_value(), expected))
    from vera.db.embedded import EmbeddedPostgres
    from vera.stack.run_files import read_stack_file

    data_dir = settings.data_dir.expanduser()
    # A running `vera up` keeps its database: read it, leave it running.
    stack_running = read_stack_file(data_dir) is not None
    pg = EmbeddedPostgres(data_dir)
    pg.start()
    try:
        return asyncio.run(_run(pg, expected))
    finally:
        if not stack_running:
            pg.stop()


async def _run(pg, expected: dict[str, tuple[int, str]]) -> int:
    return await _verify_all(await pg.ensure_database(), expected)
