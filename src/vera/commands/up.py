"""`vera up`: the whole embedded stack in the foreground (vera.stack.supervisor)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from vera.commands import Subcommands, settings_at


def add_parser(commands: Subcommands) -> None:
    up = commands.add_parser("up", help="run the whole embedded stack in the foreground")
    up.add_argument("--data-dir", type=Path, help="where data lives (default: VERA_DATA_DIR "
                    "or the user data directory)")
    up.add_argument("--port", type=int, help="MCP port (default: VERA_MCP__PORT or 8080)")
    up.add_argument("--allow-profile-change", action="store_true",
                    help="serve a data dir that held an authenticated deployment in local "
                    "mode, without authentication, on purpose")


def main(args: argparse.Namespace) -> int:
    from vera.local_secret import LocalSecretError
    from vera.stack import StackError
    from vera.stack.supervisor import run_stack

    settings = settings_at(args.data_dir)
    port = args.port if args.port is not None else settings.mcp.port
    try:
        return asyncio.run(run_stack(settings, settings.data_dir, port,
                                     allow_profile_change=args.allow_profile_change))
    except (StackError, LocalSecretError) as exc:
        print(f"vera up: {exc}", file=sys.stderr)
        return 1
