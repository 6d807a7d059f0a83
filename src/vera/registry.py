"""An MCP registry ``server.json`` for a deployed VERA's remote endpoint, from the installed
distribution's own metadata (version, summary), so the entry never drifts from the release.

    python -m vera.registry --name com.example/vera --url https://vera.example.com/mcp
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib.metadata import metadata
from typing import Any

DISTRIBUTION = "vera-memory"
SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
# The registry's rules: reverse-DNS namespace, one slash; descriptions of 100 characters.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
DESCRIPTION_LIMIT = 100


def server_json(name: str, url: str) -> dict[str, Any]:
    """The entry: one streamable-http remote whose bearer token the user supplies (an MCP
    token from `vera connect`, never written into the entry)."""
    if not NAME_PATTERN.match(name):
        raise ValueError(f"name {name!r} is not NAMESPACE/SERVER (e.g. com.example/vera)")
    if not url.startswith("https://"):
        raise ValueError("a registry entry's remote URL must be https://")
    meta = metadata(DISTRIBUTION)
    return {
        "$schema": SCHEMA,
        "name": name,
        "title": "VERA",
        "description": meta["Summary"][:DESCRIPTION_LIMIT],
        "version": meta["Version"],
        "remotes": [{
            "type": "streamable-http",
            "url": url,
            "headers": [{
                "name": "Authorization",
                "description": "Bearer token: the MCP token `vera connect` stores for you",
                "value": "Bearer {token}",
                "isRequired": True,
                "isSecret": True,
                "variables": {"token": {"isRequired": True, "isSecret": True}},
            }],
        }],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vera.registry", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", required=True, help="registry name, NAMESPACE/SERVER")
    parser.add_argument("--url", required=True, help="the gateway's public MCP URL (https)")
    args = parser.parse_args(argv)
    try:
        entry = server_json(args.name, args.url)
    except ValueError as exc:
        print(f"vera.registry: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(entry, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
