"""`vera backup` and `vera restore`: a `vera up` deployment's backup, taken while it
serves, and its restore into a new data dir (``vera.stack.backup`` says what a backup
holds). Exit codes: 0 done, 1 failed (the reason on one line)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vera.commands import Subcommands, settings_at


def add_parser(commands: Subcommands) -> None:
    backup = commands.add_parser(
        "backup", help="back up a `vera up` deployment (while it serves) into a new directory")
    backup.add_argument("dest", type=Path, help="a new or empty directory for the backup")
    backup.add_argument("--data-dir", type=Path, help="the deployment's data dir (default: "
                        "VERA_DATA_DIR or the user data directory)")
    restore = commands.add_parser(
        "restore", help="restore a `vera backup` into a new data dir")
    restore.add_argument("source", type=Path, help="the directory `vera backup` wrote")
    restore.add_argument("--data-dir", type=Path, required=True,
                         help="a new or empty data dir to restore into")


def main(args: argparse.Namespace) -> int:
    from vera.stack import StackError
    from vera.stack.backup import backup, restore

    data_dir = settings_at(args.data_dir).data_dir
    try:
        if args.command == "backup":
            manifest = backup(data_dir, args.dest)
            how = "while serving" if manifest["while_serving"] else "stopped"
            print(f"backed up {data_dir} into {args.dest.resolve()} (release "
                  f"{manifest['release']}, {how})")
        else:
            manifest = restore(args.source, data_dir)
            print(f"restored {args.source.resolve()} (taken {manifest['taken_at']} by release "
                  f"{manifest['release']}) into {data_dir}; start it with `vera up --data-dir "
                  f"{data_dir}` and the deployment's variables")
    except (StackError, RuntimeError) as exc:
        print(f"vera {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0
