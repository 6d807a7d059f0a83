"""`vera`: the front door. up | serve | api | migrate | ingest | curate | rank | admin |
connect | disconnect | doctor."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from pathlib import Path

from vera.config import ConfigError, Settings, load_settings
from vera.logs import configure_logging

SERVICE_NAMES = ("identity", "knowledge", "retrieval", "snapshot")
SERVER_EXTRA = "server"
log = logging.getLogger("vera.cli")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vera", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="run the whole embedded stack in the foreground")
    up.add_argument("--data-dir", type=Path, help="where data lives (default: VERA_DATA_DIR "
                    "or the user data directory)")
    up.add_argument("--port", type=int, help="MCP port (default: VERA_MCP__PORT or 8080)")

    serve = commands.add_parser("serve", help="run one gRPC service alone")
    serve.add_argument("service", choices=SERVICE_NAMES)
    serve.add_argument("--address", help="HOST:PORT to bind (default: VERA_SERVICES__<SVC>)")

    commands.add_parser("api", help="run the REST API process (identity admin, curation)")

    migrate = commands.add_parser("migrate", help="apply every service's SQL migrations, "
                                  "or one service's (signed in as that service's own role)")
    migrate.add_argument("service", nargs="?", choices=SERVICE_NAMES,
                         help="only this service's schema (default: all four)")
    migrate.add_argument("--data-dir", type=Path, help="embedded PostgreSQL data dir "
                         "(ignored when VERA_DATABASE__DSN is set)")

    from vera.ingest import add_parser as add_ingest_parser

    add_ingest_parser(commands)

    from vera.curate import add_parser as add_curate_parser

    add_curate_parser(commands)

    from vera.rank import add_parser as add_rank_parser

    add_rank_parser(commands)

    from vera.integrations.commands import add_parsers as add_integration_parsers

    add_integration_parsers(commands)

    admin = commands.add_parser("admin", help="operator commands (run next to the stack)")
    admin_commands = admin.add_subparsers(dest="admin_command", required=True)
    create_user = admin_commands.add_parser(
        "create-user", help="create a user and print its API key once (--admin: the first "
        "administrator; later administrators are created by an admin over REST)")
    create_user.add_argument("--name", required=True, help="display name")
    create_user.add_argument("--admin", action="store_true", help="make it an administrator")
    create_user.add_argument("--data-dir", type=Path, help="data dir of the running stack")
    return parser


def _settings(data_dir: Path | None) -> Settings:
    return load_settings(data_dir=data_dir) if data_dir else load_settings()


def _cmd_up(args: argparse.Namespace) -> int:
    from vera.local_secret import LocalSecretError
    from vera.stack import StackError, run_stack

    settings = _settings(args.data_dir)
    port = args.port if args.port is not None else settings.mcp.port
    try:
        return asyncio.run(run_stack(settings, settings.data_dir, port))
    except (StackError, LocalSecretError) as exc:
        print(f"vera up: {exc}", file=sys.stderr)
        return 1


def _cmd_serve(args: argparse.Namespace) -> int:
    from vera.rpc.server import serve_until_signalled

    settings = load_settings()
    address = args.address or getattr(settings.services, args.service)
    module = importlib.import_module(f"vera.services.{args.service}.server")

    async def main() -> None:
        hosted = await module.create(settings, address)
        await serve_until_signalled(
            hosted.running, hosted.aclose, grace=settings.rpc.longest_deadline_seconds)

    asyncio.run(main())
    return 0


async def _migrate_schemas(dsn: str, services: tuple[str, ...] = SERVICE_NAMES) -> None:
    from vera.db.migrate import migrate

    for name in services:
        applied = await migrate(dsn, name, f"vera.services.{name}")
        print(f"{name}: {len(applied)} migration(s) applied")


def _cmd_migrate(args: argparse.Namespace) -> int:
    settings = _settings(args.data_dir)
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


def _cmd_ingest(args: argparse.Namespace) -> int:
    from vera.ingest import run

    return run(args, _settings(args.data_dir))


def _cmd_admin(args: argparse.Namespace) -> int:
    from vera.errors import VeraError
    from vera.identity.v1 import identity_pb2, identity_pb2_grpc
    from vera.rpc.client import open_channel
    from vera.stack import stack_client_settings

    settings = _settings(args.data_dir)
    settings = stack_client_settings(settings, settings.data_dir)

    async def create() -> tuple[identity_pb2.Principal, str]:
        channel = open_channel(settings.services.identity, settings.rpc.deadline_seconds,
                               auth_key=settings.rpc.auth_key, caller="cli")
        try:
            stub = identity_pb2_grpc.IdentityServiceStub(channel)
            user = await stub.CreateUser(
                identity_pb2.CreateUserRequest(display_name=args.name, admin=args.admin))
            key = await stub.CreateApiKey(identity_pb2.CreateApiKeyRequest(
                principal_id=user.principal.principal_id, label="created by vera admin"))
            return user.principal, key.api_key
        finally:
            await channel.close()

    try:
        principal, api_key = asyncio.run(create())
    except VeraError as exc:
        hint = (" (an administrator already exists: create more over POST /identity/users)"
                if exc.reason == "UNAUTHORIZED" else "")
        print(f"vera admin: failed ({exc.reason.lower()}){hint}", file=sys.stderr)
        return 1
    print(f"principal_id: {principal.principal_id}\nadmin:        "
          f"{str(principal.admin).lower()}\napi_key:      {api_key}\n"
          "The API key is shown once; store it like a password.")
    return 0


def _cmd_curate(args: argparse.Namespace) -> int:
    from vera.curate import run

    return run(args, _settings(args.data_dir))


def _cmd_rank(args: argparse.Namespace) -> int:
    from vera.rank import run

    return run(args, _settings(args.data_dir))


def _cmd_api(args: argparse.Namespace) -> int:
    from vera.entrypoints.api.main import main as api_main
    from vera.local_secret import ensure_secret

    settings = _settings(None)
    if settings.auth_profile == "local-dev" and settings.api.local_secret is None:
        # Its local administrator proves the data dir's secret, as under `vera up`.
        os.environ["VERA_API__LOCAL_SECRET"] = ensure_secret(settings.data_dir)
    return api_main()


def _cmd_integration(args: argparse.Namespace) -> int:
    from vera.integrations.commands import run

    return run(args)


COMMANDS = {
    "connect": _cmd_integration, "disconnect": _cmd_integration, "doctor": _cmd_integration,
    "up": _cmd_up, "api": _cmd_api, "serve": _cmd_serve, "migrate": _cmd_migrate,
    "ingest": _cmd_ingest, "curate": _cmd_curate, "rank": _cmd_rank, "admin": _cmd_admin,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        component = args.service if args.command == "serve" else args.command
        configure_logging(settings.observability.log_level, component)
        return COMMANDS[args.command](args)
    except ModuleNotFoundError as exc:
        # Every library the client install declares is there, so a missing one belongs to
        # the [server] extra (`pip install vera-memory` is the client alone).
        if not exc.name or exc.name.partition(".")[0] == "vera":
            raise
        print(f"vera {args.command}: needs VERA's server libraries (no module {exc.name!r}); "
              f"install them with: pip install 'vera-memory[{SERVER_EXTRA}]'", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"vera: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
