"""The `vera` commands, one module each. Every module has ``add_parser(commands)``, which
adds its command line, and ``main(args) -> int``, which runs it (vera.cli parses and
dispatches). Server-only libraries are imported inside ``main``: the client install parses
every command line."""

from __future__ import annotations

from pathlib import Path

from vera.config import Settings, load_settings

SERVICE_NAMES = ("identity", "knowledge", "retrieval", "snapshot")


def settings_at(data_dir: Path | None) -> Settings:
    """The process's settings, with ``data_dir`` as the data dir when a command names one."""
    return load_settings(data_dir=data_dir) if data_dir else load_settings()
