"""The `vera` commands, one module each. Every module has ``add_parser(commands)``, which
adds its command line, and ``main(args) -> int``, which runs it (vera.cli parses and
dispatches). Server-only libraries are imported inside ``main``: the client install parses
every command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from vera.config import Settings, load_settings

# What ``add_parser`` is handed: argparse's subparsers object. argparse exports no public
# name for its class, so this is the one place the private one is spelled
# (tests/unit/test_one_spelling.py).
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # noqa: SLF001

SERVICE_NAMES = ("identity", "knowledge", "retrieval", "snapshot")


def settings_at(data_dir: Path | None) -> Settings:
    """The process's settings, with ``data_dir`` as the data dir when a command names one."""
    return load_settings(data_dir=data_dir) if data_dir else load_settings()
