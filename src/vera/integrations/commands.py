"""The ``vera connect | disconnect | doctor`` commands: arguments, approval and reports.

Exit codes: 0 done, 1 a check failed or the change was declined, 2 bad input, 3 a conflict
or an edit that needs a manual patch (nothing was written).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from vera.api_client import in_clear
from vera.commands import Subcommands
from vera.config import load_settings
from vera.errors import InvalidInput
from vera.integrations import approvals, credentials, endpoints, workspace
from vera.integrations.artifacts import RUNTIMES
from vera.integrations.connect import Plan, plan_connect, store_token
from vera.integrations.contract import (
    SAVE_MODES,
    apply_overrides,
    credential_scopes,
    load_contract,
    save_mode,
)
from vera.integrations.disconnect import plan_disconnect, uses_shared_credential
from vera.integrations.doctor import diagnose
from vera.integrations.editors import UnsafeEdit
from vera.integrations.ownership import (
    RUNTIME_OAUTH,
    BadRecord,
    credential_files,
    read_record,
)
from vera.integrations.runtimes import ADAPTERS, OAUTH_STEP
from vera.integrations.workspace import Workspace, parse_back


def add_parser(commands: Subcommands) -> None:
    connect = commands.add_parser("connect", help="set up a coding runtime for this project")
    connect.add_argument("runtime", choices=RUNTIMES)
    connect.add_argument("--api-url", default=os.environ.get("VERA_API_URL"),
                         help="VERA REST API (default: VERA_API_URL)")
    connect.add_argument("--mcp-url", default=os.environ.get("VERA_MCP_URL"),
                         help="VERA MCP endpoint (default: VERA_MCP_URL)")
    connect.add_argument("--save-mode", choices=SAVE_MODES,
                         help="reviewed override of the contract's save_mode (default: the "
                         "one chosen at this runtime's last connect, else suggest)")
    connect.add_argument("--api-key-stdin", action="store_true",
                         help="read the API key for the MCP token exchange from stdin "
                         "(otherwise it is asked for on a terminal)")
    connect.add_argument("--allow-plain-http", action="store_true",
                         help="send the API key and the MCP token over http:// to a "
                         "non-loopback host")
    connect.add_argument("--data-dir", type=Path,
                         help="data dir of the local stack (default: VERA_DATA_DIR or "
                         "the default one); its secret mints the local MCP token")
    disconnect = commands.add_parser("disconnect", help="remove VERA's unchanged setup")
    disconnect.add_argument("runtime", choices=RUNTIMES)
    doctor = commands.add_parser("doctor", help="check a connected runtime sees VERA")
    doctor.add_argument("runtime", nargs="?", choices=RUNTIMES)
    token = commands.add_parser(
        "mcp-token", help="print this checkout's MCP token, minted again when it ends soon "
        "(what the runtimes run as their headers helper)")
    token.add_argument("--headers", action="store_true",
                       help="print the HTTP header object instead of the bare token")
    token.add_argument("--runtime", choices=RUNTIMES,
                       help="the connected runtime whose token to print (without it: the "
                       "token every runtime shared before each had its own)")
    for parser in (connect, disconnect, doctor, token):
        parser.add_argument("--project-dir", type=Path, default=Path.cwd(),
                            help="any folder in the repository (default: here)")
    for parser in (connect, disconnect):
        parser.add_argument("--yes", action="store_true", help="apply without asking")


def repository_root(folder: Path) -> Path:
    found = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder,
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise InvalidInput("project_dir", "project_dir is not inside a Git repository")
    return Path(found.stdout.strip()).resolve()


def _approved(args: argparse.Namespace, question: str) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print("not applied: pass --yes to apply without a terminal", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


@dataclass
class Credential:
    """What connect configures: whether the runtime sends a static token (``static``), the
    record's label, the token to store now, the minter to keep, and the next steps."""

    static: bool
    label: str
    token: str | None = None
    minter: credentials.Minter | None = None
    steps: list[str] = field(default_factory=list)
    created_key: bool = False  # a per-connection key made now (revoked if not applied)


def _checked_token(mcp_url: str, token: str) -> str:
    refusal = endpoints.credential_refusal(mcp_url, token)
    if refusal:
        raise InvalidInput("mcp_token", f"the MCP endpoint refuses the minted token "
                           f"({refusal})")
    return token


def _local_credential(args: argparse.Namespace, api_url: str, root: Path,
                      scopes: tuple[str, ...]) -> Credential | None:
    """The local stack's token, minted with its data dir's secret, which is read here and
    never written anywhere; None when ``api_url`` is not the local stack of the data dir."""
    data_dir = (args.data_dir or load_settings().data_dir).expanduser().resolve()
    if credentials.local_bearer(data_dir, api_url) is None:
        return None
    _refuse_tracked_credentials(root, args.runtime)
    minter = credentials.Minter(api_url, args.mcp_url, scopes, data_dir=str(data_dir))
    try:
        token = credentials.mint(minter)
    except credentials.NotMinted as exc:
        raise InvalidInput("api_url", f"the local MCP token could not be minted ({exc})"
                           ) from None
    return Credential(True, credential_files(args.runtime).label,
                      _checked_token(args.mcp_url, token), minter)


def _stored_key(root: Path, api_url: str, *runtimes: str | None) -> credentials.Minter | None:
    """The first of ``runtimes``' stored connection keys (``None``: the shared layout's)
    that is for ``api_url``."""
    for name in runtimes:
        kept = credentials.load(root, name)
        if kept is not None and kept.api_url == api_url and kept.api_key:
            return kept
    return None


def _credential(args: argparse.Namespace, checked: endpoints.Endpoints, api_url: str,
                root: Path, mode: str) -> Credential:
    scopes = credential_scopes(args.runtime, mode)
    remote = checked.profile == "remote-authenticated"
    if remote or checked.profile == "local-dev":
        local = _local_credential(args, api_url, root, scopes)
        if local is not None:
            return local
    if not remote:
        return Credential(False, "none")
    files = credential_files(args.runtime)
    if checked.authorization_servers:
        previous = read_record(root).get(args.runtime)
        if (previous and previous.credential == files.label
                and (root / files.token).exists()):
            # A working static token stays until the user has proven OAuth works.
            return Credential(True, previous.credential, steps=[
                f"{OAUTH_STEP[args.runtime]}; once it works, delete {files.token} and run "
                f"`vera connect {args.runtime}` again to drop the static token"])
        return Credential(False, RUNTIME_OAUTH, steps=[OAUTH_STEP[args.runtime]])
    _refuse_tracked_credentials(root, args.runtime)
    if args.api_key_stdin:
        key = sys.stdin.readline().strip()
    elif sys.stdin.isatty():
        key = getpass.getpass("VERA API key for the MCP token (not stored; Enter to skip): ")
    else:
        key = ""
    own = None if key else _stored_key(root, api_url, args.runtime)
    # No key typed: another runtime's stored key (or the shared layout's) makes this runtime
    # a key of its own.
    sibling = None if key or own else _stored_key(
        root, api_url, *(n for n in RUNTIMES if n != args.runtime), None)
    if own is not None:
        # This runtime's own connection key mints again: a reconnect needs no key typed.
        minter = credentials.Minter(api_url, args.mcp_url, scopes, own.api_key, own.key_id,
                                    allow_plain_http=args.allow_plain_http)
        created = False
    elif not key and sibling is None:
        return Credential(True, files.label, steps=[
            f"no MCP token stored (no API key was typed): for a team's VERA run `vera connect "
            f"{args.runtime} --api-key-stdin < key-file` (or on a terminal, to be asked; "
            "VERA_API_KEY is not read); for a `vera up` on this machine pass its --data-dir "
            "(or VERA_DATA_DIR)"])
    else:
        key = key or str(sibling.api_key if sibling else "")
        label = f"vera connect {args.runtime} {socket.gethostname()} {root.name}"[:100]
        try:
            connection_key, key_id = credentials.create_connection_key(
                api_url, key, label, args.allow_plain_http)
        except credentials.NotMinted as exc:
            raise InvalidInput("api_key", f"the MCP token exchange failed ({exc})") from None
        finally:
            del key
        minter = credentials.Minter(api_url, args.mcp_url, scopes, connection_key, key_id,
                                    allow_plain_http=args.allow_plain_http)
        created = True
    try:
        try:
            token = _checked_token(args.mcp_url, credentials.mint(minter))
        except credentials.NotMinted as exc:
            raise InvalidInput("api_key", f"the MCP token exchange failed ({exc})") from None
    except InvalidInput:
        if created:
            credentials.revoke_connection_key(minter)  # nothing will mint with it
        raise
    return Credential(True, files.label, token, minter, created_key=created)


def _refuse_tracked_credentials(root: Path, runtime: str) -> None:
    tracked = workspace.tracked(root, list(credential_files(runtime).paths))
    if tracked:
        raise UnsafeEdit(f"{', '.join(tracked)} is tracked by Git, so the MCP token would be "
                         "committed: untrack it (git rm --cached) and connect again")


def _blocked(plan: Plan) -> int:
    for conflict in plan.conflicts:
        print(f"conflict: {conflict}", file=sys.stderr)
    for patch in plan.manual:
        print(f"manual patch needed: {patch}", file=sys.stderr)
    print("nothing was written", file=sys.stderr)
    return 3


def run_connect(args: argparse.Namespace) -> int:
    api_url = endpoints.validate_url("api_url", args.api_url).rstrip("/")
    mcp_url = endpoints.validate_url("mcp_url", args.mcp_url)
    for name, url in (("api_url", api_url), ("mcp_url", mcp_url)):
        if in_clear(url) and not args.allow_plain_http:
            raise InvalidInput(name, f"{name} is plain http:// to a host other than this "
                               "machine: use https, or --allow-plain-http if this network is "
                               "trusted")
    root = repository_root(args.project_dir)
    # Before anything is written or minted: a vera server in another scope the runtime
    # would use (or merge) instead of the project's, and managed policy against it.
    issues = ADAPTERS[args.runtime].scope_issues(root, dict(os.environ))
    for issue in issues:
        print(issue.line(), file=sys.stderr)
    if any(issue.blocking for issue in issues):
        print("nothing was written", file=sys.stderr)
        return 3
    checked = endpoints.check(api_url, mcp_url)
    for line in checked.checks:
        print(line.line())
    if not checked.ok:
        print("VERA is not reachable at the given URLs; nothing was written", file=sys.stderr)
        return 1
    previous = approvals.load(root).get(args.runtime)
    kept = not args.save_mode and previous is not None and bool(previous.overrides)
    # A reconnect keeps what this user reviewed; only a flag changes it (never the tracked
    # record, which anyone may commit).
    overrides = dict(previous.overrides) if previous else {}
    if args.save_mode:
        overrides["defaults.save_mode"] = args.save_mode
    mode = save_mode(apply_overrides(load_contract(), overrides)[0])
    print(f"save mode: {mode}" + (" (kept from your last connect; --save-mode changes it)"
                                  if kept else ""))
    chosen = _credential(args, checked, api_url, root, mode)
    # The local stack of the data dir asks for a token too, minted from its secret.
    local = chosen.minter is not None and chosen.minter.local
    print(f"auth profile: {'local-dev' if local else checked.profile}")
    code = 1
    try:
        code = _apply_connect(args, root, api_url, mcp_url, overrides, chosen)
    finally:
        if chosen.created_key and code != 0 and chosen.minter is not None:
            credentials.revoke_connection_key(chosen.minter)  # nobody will use it
    return code


def _apply_connect(args: argparse.Namespace, root: Path, api_url: str, mcp_url: str,
                   overrides: dict[str, str], chosen: Credential) -> int:
    try:
        plan = plan_connect(root, args.runtime, api_url, mcp_url, authenticated=chosen.static,
                            credential=chosen.label, overrides=overrides)
    except UnsafeEdit as exc:
        print(f"manual patch needed: {exc}; nothing was written", file=sys.stderr)
        return 3
    if plan.blocked:
        return _blocked(plan)
    if chosen.token is not None:
        store_token(plan, chosen.token)
    print(plan.workspace.diff(), end="")
    if not _approved(args, "Apply these changes?"):
        return 1
    changed = plan.workspace.apply()
    failures = [f"{rel}: {err}" for rel in changed if (err := parse_back(root, rel))]
    for failure in failures:
        print(f"parse-back failed: {failure}", file=sys.stderr)
    if failures:
        return 1
    if chosen.minter is not None:
        previous = credentials.load(root, args.runtime)
        credentials.store(root, args.runtime, chosen.minter)
        if previous is not None and previous.key_id != chosen.minter.key_id:
            credentials.revoke_connection_key(previous)  # replaced: nothing mints with it
    _retire_shared_key(root)
    approvals.save(root, args.runtime, approvals.Approval(
        api_url, mcp_url, plan.connection.overrides, chosen.label))
    print(f"VERA setup completed for {args.runtime}")
    print("changed files:\n" + "".join(f"  {rel}\n" for rel in changed), end="")
    for step in [*chosen.steps, f"restart {args.runtime}, then run `vera doctor {args.runtime}`"]:
        print(f"next: {step}")
    return 0


def run_disconnect(args: argparse.Namespace) -> int:
    root = repository_root(args.project_dir)
    connections = read_record(root)
    if args.runtime not in connections:
        print(f"{args.runtime} is not connected in {root}")
        return 0
    ws = Workspace(root)
    removal = plan_disconnect(ws, args.runtime, connections)
    print(ws.diff(), end="")
    for conflict in removal.conflicts:
        print(f"conflict: {conflict}", file=sys.stderr)
    if not _approved(args, "Remove VERA's setup?"):
        return 1
    changed = ws.apply()
    approvals.forget(root, args.runtime)
    if (minter := credentials.forget(root, args.runtime)) is not None:
        credentials.revoke_connection_key(minter)  # this runtime's alone: nothing else uses it
    _retire_shared_key(root)
    print(f"VERA disconnected from {args.runtime}")
    print("changed files:\n" + "".join(f"  {rel}\n" for rel in changed), end="")
    return 3 if removal.conflicts else 0


def _retire_shared_key(root: Path) -> None:
    """The shared layout's key, once no connected runtime sends its token (each one
    connected since has a key of its own)."""
    if uses_shared_credential(read_record(root)):
        return
    if (shared := credentials.forget(root, None)) is not None:
        credentials.revoke_connection_key(shared)


def run_doctor(args: argparse.Namespace) -> int:
    root = repository_root(args.project_dir)
    report = diagnose(root, args.runtime)
    if not report:
        print("no runtime is connected here; run `vera connect <runtime>`")
        return 1
    healthy = True
    for runtime, findings in report.items():
        print(f"{runtime}:")
        for finding in findings:
            healthy &= finding.ok
            print(f"  {'ok  ' if finding.ok else 'TODO'} {finding.name}: {finding.detail}")
    return 0 if healthy else 1


def run_mcp_token(args: argparse.Namespace) -> int:
    """Quiet by design (a runtime runs it): the token on stdout, or one line on stderr and
    exit 1, with nothing on stdout."""
    try:
        token = credentials.current_token(repository_root(args.project_dir), args.runtime)
    except credentials.NotMinted as exc:
        print(f"vera mcp-token: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(credentials.headers(token)) if args.headers else token)
    return 0


COMMANDS = {"connect": run_connect, "disconnect": run_disconnect, "doctor": run_doctor,
            "mcp-token": run_mcp_token}


def main(args: argparse.Namespace) -> int:
    try:
        return COMMANDS[args.command](args)
    except InvalidInput as exc:
        print(f"vera {args.command}: {exc.message}", file=sys.stderr)
        return 2
    except UnsafeEdit as exc:
        print(f"vera {args.command}: {exc}; nothing was written", file=sys.stderr)
        return 3
    except BadRecord as exc:
        print(f"vera {args.command}: {exc}; nothing was written or sent", file=sys.stderr)
        return 2
