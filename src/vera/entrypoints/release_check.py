"""What a platform team checks on its own cluster, because the development machines cannot
(docs/deploy.md, "What only your cluster can check"): the release's image runs, the API is
Ready (every gRPC service it needs answers, Qdrant included), the gateway refuses a caller
without credentials, and, with NetworkPolicies on, no pod outside VERA reaches a gRPC
service. The chart runs it as its `helm test` hook (templates/tests/release-check.yaml),
from a pod that carries none of VERA's labels.

Prints one line per check and exits 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

TIMEOUT_SECONDS = 10.0
# A NetworkPolicy drops the packets of a refused connection: it neither completes nor is
# refused, so the check waits this long for the handshake.
ISOLATION_WAIT_SECONDS = 3.0


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.check}: {self.detail}"


def api_ready(api_url: str) -> Finding:
    try:
        answer = httpx.get(f"{api_url}/readyz", timeout=TIMEOUT_SECONDS)
    except httpx.HTTPError as error:
        return Finding("api_ready", False, f"no answer ({type(error).__name__})")
    return Finding("api_ready", answer.status_code == 200, f"/readyz {answer.status_code}")


def gateway_requires_credentials(mcp_url: str, host: str | None) -> Finding:
    """An MCP initialize without a token must be refused 401 (auth is on). ``host``: the
    Host the gateway admits (the Ingress host) when it is not the URL's."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "vera-release-check", "version": "1"}}}
    try:
        answer = httpx.post(mcp_url, json=body, timeout=TIMEOUT_SECONDS, headers={
            "accept": "application/json, text/event-stream", **({"host": host} if host else {})})
    except httpx.HTTPError as error:
        return Finding("gateway_requires_credentials", False,
                       f"no answer ({type(error).__name__})")
    return Finding("gateway_requires_credentials", answer.status_code == 401,
                   f"initialize without a token answered {answer.status_code}")


def grpc_isolated(address: str) -> Finding:
    """``host:port`` of a gRPC Service must not accept this pod's connection."""
    host, _, port = address.rpartition(":")
    check = f"grpc_isolated {host}"
    try:
        with socket.create_connection((host, int(port)), timeout=ISOLATION_WAIT_SECONDS):
            return Finding(check, False, f"port {port} accepted a pod outside VERA "
                           "(is the CNI enforcing NetworkPolicy?)")
    except TimeoutError:
        return Finding(check, True, f"port {port} unreachable from outside VERA")
    except OSError as error:
        return Finding(check, True, f"port {port} refused ({type(error).__name__})")


def run_checks(api_url: str, mcp_url: str, mcp_host: str | None,
               isolated: Sequence[str]) -> list[Finding]:
    return [api_ready(api_url), gateway_requires_credentials(mcp_url, mcp_host),
            *(grpc_isolated(address) for address in isolated)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vera.entrypoints.release_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-url", required=True, help="the API's base URL")
    parser.add_argument("--mcp-url", required=True, help="the gateway's MCP endpoint")
    parser.add_argument("--mcp-host", help="the Host header the gateway admits (its Ingress host)")
    parser.add_argument("--isolated", action="append", default=[], metavar="HOST:PORT",
                        help="a gRPC Service no pod outside VERA may reach (repeatable)")
    args = parser.parse_args(argv)
    findings = run_checks(args.api_url.rstrip("/"), args.mcp_url, args.mcp_host,
                          args.isolated)
    for finding in findings:
        print(finding.line())
    return 0 if all(f.ok for f in findings) else 1


if __name__ == "__main__":
    sys.exit(main())
