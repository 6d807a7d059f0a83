"""`vera api`: the REST API process (vera.entrypoints.api)."""

from __future__ import annotations

import argparse
import os

from vera.commands import Subcommands, settings_at


def add_parser(commands: Subcommands) -> None:
    commands.add_parser("api", help="run the REST API process (identity admin, curation)")


def main(args: argparse.Namespace) -> int:
    from vera.entrypoints.api.main import main as api_main
    from vera.local_secret import ensure_secret

    settings = settings_at(None)
    if settings.auth_profile == "local-dev" and settings.api.local_secret is None:
        # Its local administrator proves the data dir's secret, as under `vera up`.
        os.environ["VERA_API__LOCAL_SECRET"] = ensure_secret(settings.data_dir)
    return api_main()
