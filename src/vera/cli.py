"""`vera`: the front door. up | serve | api | migrate | ingest | harvest | curate | rank |
connect | disconnect | doctor | mcp-token | admin | audit | backup | restore."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from vera import SERVER_VERSION
from vera.config import ConfigError, load_settings
from vera.local_secret import LocalSecretError
from vera.logs import configure_logging
from vera.observability import correlation

SERVER_EXTRA = "server"
log = logging.getLogger("vera.cli")

# Each command's own module (vera.commands): ``add_parser`` and ``main``.
COMMANDS = {
    "up": "vera.commands.up",
    "serve": "vera.commands.serve",
    "api": "vera.commands.api",
    "migrate": "vera.commands.migrate",
    "ingest": "vera.commands.ingest",
    "harvest": "vera.commands.harvest",
    "curate": "vera.commands.curate",
    "rank": "vera.commands.rank",
    "connect": "vera.integrations.commands",
    "disconnect": "vera.integrations.commands",
    "doctor": "vera.integrations.commands",
    "mcp-token": "vera.integrations.commands",
    "admin": "vera.commands.admin",
    "audit": "vera.commands.audit",
    "backup": "vera.commands.backup",
    "restore": "vera.commands.backup",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vera", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {SERVER_VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in dict.fromkeys(COMMANDS.values()):
        importlib.import_module(module).add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
        component = args.service if args.command == "serve" else args.command
        configure_logging(settings.observability.log_level, component,
                          settings.observability.log_format, correlation.log_fields)
        return importlib.import_module(COMMANDS[args.command]).main(args)
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
    except LocalSecretError as exc:
        # A data dir's secret that others may read, or that cannot be read: refuse, saying
        # which file (commands other than `vera up`, which reports it itself).
        print(f"vera {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
