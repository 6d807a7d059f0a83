"""`vera curate`: the curation CLI, a thin client of the REST API (never of MCP).

The API and the API key are found as for every person's command (``vera.api_client``:
``--api-url`` or the running stack, ``--api-key-stdin``, ``VERA_API_KEY`` or a prompt).
Exit codes: 0 done, 1 the API could not be reached, 2 refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from vera.api_client import EXIT_OK, ApiRefused, ClientStop, add_connection_arguments, open_client
from vera.commands import Subcommands, settings_at
from vera.config import Settings


def add_parser(commands: Subcommands) -> None:
    curate = commands.add_parser("curate", help="review proposals and retract sources (REST)")
    add_connection_arguments(curate)
    curate.add_argument("--json", action="store_true", help="print the raw JSON response")
    sub = curate.add_subparsers(dest="curate_command", required=True)

    listing = sub.add_parser(
        "list", help="list a project's pending proposals and conflicted attempts"
    )
    listing.add_argument("project", help="project slug or id")
    listing.add_argument("--page-size", type=int, default=0, help="1..100 (default 50)")
    listing.add_argument("--page-token", default="", help="next_page_token of a previous page")
    listing.add_argument("--conflicted-page-token", default="",
                         help="next_page_token of a previous page of conflicted attempts")

    verify = sub.add_parser("verify", help="promote a proposal into the project's shared truth")
    verify.add_argument("project")
    verify.add_argument("fact_key")
    verify.add_argument("--trust-tier", type=int, help="human tier 0..3 (default 1)")
    verify.add_argument("--authority", type=float, help="0..1 (default 0.7)")
    verify.add_argument("--note", default="", help="recorded with the decision")

    reject = sub.add_parser("reject", help="reject a proposal")
    reject.add_argument("project")
    reject.add_argument("fact_key")
    reject.add_argument("--reason", required=True)

    retract = sub.add_parser("retract-source", help="retract a source of the project")
    retract.add_argument("project")
    retract.add_argument("source_id")
    retract.add_argument("--reason", required=True)

    # `vera curate list payments --api-url URL` reads as `vera ingest` does.
    for command in (listing, verify, reject, retract):
        add_connection_arguments(command, repeated=True)
        command.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                             help="print the raw JSON response")


def _segment(value: str) -> str:
    return quote(value, safe="")


def _request(args: argparse.Namespace) -> tuple[str, str, dict[str, Any] | None, dict]:
    # Every value its own path segment, encoded: a source id may hold "/" (a file path),
    # and "../" in one must not reach another route.
    base = f"/curation/projects/{_segment(args.project)}"
    if args.curate_command == "list":
        params = {k: v for k, v in (("page_size", args.page_size),
                                    ("page_token", args.page_token)) if v}
        return "GET", f"{base}/proposals", None, params
    if args.curate_command == "verify":
        body: dict[str, Any] = {"note": args.note}
        if args.trust_tier is not None:
            body["trust_tier"] = args.trust_tier
        if args.authority is not None:
            body["authority"] = args.authority
        return "POST", f"{base}/proposals/{_segment(args.fact_key)}/verify", body, {}
    if args.curate_command == "reject":
        return ("POST", f"{base}/proposals/{_segment(args.fact_key)}/reject",
                {"reason": args.reason}, {})
    return ("POST", f"{base}/sources/{_segment(args.source_id)}/retract",
            {"reason": args.reason}, {})


def _state(fact: dict[str, Any]) -> str:
    """A fact's state as MCP spells it, whichever spelling the API answers
    (``VERA_API__VALUE_SPELLING``)."""
    return str(fact.get("state", "")).removeprefix("FACT_STATE_").lower()


def _total(data: dict[str, Any]) -> str:
    """A list's total, "at least N" when the service stopped counting."""
    return f"at least {data['total']}" if data.get("total_is_lower_bound") else str(data["total"])


def _summary(command: str, data: dict[str, Any]) -> str:
    if command == "list":
        lines = [f"{_total(data)} pending proposal(s)"]
        for p in data["proposals"]:
            flags = []
            if p.get("conflicting_fact_keys"):
                flags.append("conflicts: " + ", ".join(p["conflicting_fact_keys"]))
            if p.get("known_fact_key"):
                flags.append(f"already known: {p['known_fact_key']}")
            lines.append(f"  {p['fact_key']}  {p['subject']} | {p['predicate']} | "
                         f"{p['object']}" + (f"  ({'; '.join(flags)})" if flags else ""))
        if data.get("next_page_token"):
            lines.append(f"more: --page-token {data['next_page_token']}")
        conflicted = data.get("conflicted_attempts") or {}
        if conflicted.get("total"):
            lines.append(f"{_total(conflicted)} conflicted attempt(s): proposed corrections of"
                         " active facts (apply one with a correction line in vera ingest)")
            for a in conflicted["attempts"]:
                lines.append(f"  {a['subject']} | {a['predicate']} | {a['object']}"
                             f"  (contradicts: {', '.join(a['contradicted_fact_keys'])})")
            if conflicted.get("next_page_token"):
                lines.append(f"more: --conflicted-page-token {conflicted['next_page_token']}")
        return "\n".join(lines)
    if command == "verify":
        fact = data["fact"]
        return f"verified: {fact['fact_key']} is {_state(fact)} in project {fact['scope_id']}"
    if command == "reject":
        return f"rejected: {data['proposal']['fact_key']}"
    return (f"{data['status']}: {data['assertions_withdrawn']} assertion(s) withdrawn, "
            f"{len(data['retracted_fact_keys'])} fact(s) retracted, "
            f"{len(data['still_supported_fact_keys'])} still supported")


def run(args: argparse.Namespace, settings: Settings, transport: Any = None) -> int:
    method, path, body, params = _request(args)
    try:
        with open_client(args, settings, transport) as api:
            data = api.call(method, path, json=body, params=params)
            if args.curate_command == "list":
                data["conflicted_attempts"] = api.call(
                    "GET", f"/curation/projects/{_segment(args.project)}/conflicted-attempts",
                    params={k: v for k, v in (("page_size", args.page_size),
                                              ("page_token", args.conflicted_page_token)) if v})
    except ClientStop as stop:
        print(f"vera curate: {stop.message}", file=sys.stderr)
        return stop.exit_code
    except ApiRefused as refused:
        print(f"vera curate: project {args.project}: {refused.describe()}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2) if args.json else _summary(args.curate_command, data))
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    return run(args, settings_at(args.data_dir))
