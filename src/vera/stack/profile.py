"""The authentication profile a data dir is served in, so that a restart without the
deployment's variables never serves a team's data in local mode.

`vera up` records the profile it serves a data dir in (``<data-dir>/profile.json``). A data
dir that has held an authenticated deployment is refused in local mode: local mode answers
every caller as one anonymous administrator, so the team's tokens would be accepted as a
stranger who sees no shared project, proposals would land in the wrong scope and curators
would be refused. A data dir from before the record is recognised from its data: accounts
other than the local principal, or API keys, exist only where people signed in.
``--allow-profile-change`` serves it in local mode anyway, on purpose, without changing
the record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from vera.config import Settings
from vera.stack import StackError

Profile = Literal["local-dev", "remote-authenticated"]
PROFILE_FILE = "profile.json"
AUTHENTICATED: Profile = "remote-authenticated"
# What makes a process authenticated (vera.config.Settings.auth_profile).
AUTH_SETTINGS = (
    "VERA_MCP__JWT_SECRET, VERA_MCP__AUTH_ISSUER and VERA_MCP__AUTH_AUDIENCE (or "
    "VERA_MCP__OAUTH_JWKS_URL, or VERA_ENVIRONMENT other than local)"
)


def profile_path(data_dir: Path) -> Path:
    return data_dir / PROFILE_FILE


def recorded_profile(data_dir: Path) -> Profile | None:
    """The profile recorded in ``data_dir``; None when none is (a new data dir, or one made
    before the record existed)."""
    try:
        recorded = json.loads(profile_path(data_dir).read_text())["auth_profile"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return recorded if recorded in ("local-dev", AUTHENTICATED) else None


def record_profile(data_dir: Path, profile: Profile) -> None:
    """Replaces the record in one rename."""
    path = profile_path(data_dir)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({"auth_profile": profile}) + "\n")
    os.replace(partial, path)


# The identity schema's accounts (services/identity/migrations): a principal of kind 'user'
# or an API key exists only where someone was given an account.
HOLDS_ACCOUNTS_SQL = """
SELECT EXISTS (SELECT 1 FROM identity.principals WHERE kind <> 'local')
    OR EXISTS (SELECT 1 FROM identity.api_keys)
"""


async def holds_accounts(dsn: str) -> bool:
    """Whether the database at ``dsn`` holds accounts other than the local principal's."""
    import asyncpg  # the [server] extra: `vera up` alone calls this

    conn = await asyncpg.connect(dsn)
    try:
        # A new database has no identity schema yet (its service migrates it on start).
        if await conn.fetchval("SELECT to_regclass('identity.api_keys')") is None:
            return False
        return bool(await conn.fetchval(HOLDS_ACCOUNTS_SQL))
    finally:
        await conn.close()


def refusal(data_dir: Path) -> StackError:
    return StackError(
        f"{data_dir} holds an authenticated deployment, and these settings would serve it "
        f"in local mode, without authentication: set {AUTH_SETTINGS} as the deployment "
        "does, or pass --allow-profile-change to serve it in local mode on purpose"
    )


async def admit_profile(
    settings: Settings, data_dir: Path, dsn: str, *, allow_change: bool
) -> None:
    """Refuses (StackError) to serve ``data_dir`` in local mode when it held an
    authenticated deployment, unless ``allow_change``; records the profile it is served in
    otherwise. ``dsn``: the data dir's database, for a data dir made before the record."""
    recorded = recorded_profile(data_dir)
    if recorded is None and await holds_accounts(dsn):
        recorded = AUTHENTICATED
    if settings.auth_profile == "local-dev" and recorded == AUTHENTICATED:
        if not allow_change:
            raise refusal(data_dir)
        return  # on purpose, this once: the record keeps what the data dir is
    record_profile(data_dir, settings.auth_profile)
