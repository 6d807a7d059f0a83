"""`vera admin`: operator commands, run next to the stack (over its internal gRPC
contract, signed with the stack's key)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from vera.commands import Subcommands, settings_at


def add_parser(commands: Subcommands) -> None:
    admin = commands.add_parser("admin", help="operator commands (run next to the stack)")
    admin_commands = admin.add_subparsers(dest="admin_command", required=True)
    create_user = admin_commands.add_parser(
        "create-user", help="create a user and print its API key once (--admin: the first "
        "administrator; later administrators are created by an admin over REST)")
    create_user.add_argument("--name", required=True, help="display name")
    create_user.add_argument("--admin", action="store_true", help="make it an administrator")
    create_user.add_argument("--data-dir", type=Path, help="data dir of the running stack")


def main(args: argparse.Namespace) -> int:
    from vera.errors import VeraError
    from vera.identity.v1 import identity_pb2
    from vera.rpc.backends import Backends
    from vera.stack.run_files import read_stack_file, stack_client_settings

    settings = settings_at(args.data_dir)
    data_dir = settings.data_dir.expanduser().resolve()
    configured = "identity" in settings.services.model_fields_set  # a pod's environment
    if read_stack_file(data_dir) is None and not configured:
        # Operator commands talk to the stack of one data dir, or to the identity address
        # the environment names (a chart or compose pod), never to a guessed address.
        print(f"vera admin: no running VERA stack in {data_dir} (no run/stack.json): pass "
              "the data dir the stack runs on with --data-dir (or VERA_DATA_DIR), or start "
              "it with `vera up`", file=sys.stderr)
        return 1
    settings = stack_client_settings(settings, data_dir)

    async def create() -> tuple[identity_pb2.Principal, str]:
        backends = Backends.open(settings, caller="cli")
        try:
            user = await backends.identity.CreateUser(
                identity_pb2.CreateUserRequest(display_name=args.name, admin=args.admin))
            key = await backends.identity.CreateApiKey(identity_pb2.CreateApiKeyRequest(
                principal_id=user.principal.principal_id, label="created by vera admin"))
            return user.principal, key.api_key
        finally:
            await backends.close()

    try:
        principal, api_key = asyncio.run(create())
    except VeraError as exc:
        hint = (" (an administrator already exists: create more over POST /identity/users)"
                if exc.reason == "UNAUTHORIZED" else "")
        print(f"vera admin: failed ({exc.reason.lower()}){hint}", file=sys.stderr)
        return 1
    print(f"principal_id: {principal.principal_id}\nadmin:        "
          f"{str(principal.admin).lower()}\napi_key:      {api_key}\n"
          "The API key is shown once; store it like a password.")
    return 0
