"""`vera api`: the REST API process (vera.entrypoints.api)."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("api", help="run the REST API process (identity admin, curation)")


def main(args: argparse.Namespace) -> int:
    from vera.entrypoints.api.main import main as api_main

    return api_main()
