"""A team deployment restarted without its authentication variables is refused, never
served in local mode (issue 41, "never open by accident"): `vera up` records the profile a
data dir is served in, and recognises a data dir from before the record by its accounts.

One data dir, five starts: the team's (authenticated, an administrator created), then
without the variables (refused, naming the setting), the same with the record gone (a data
dir from before it: refused, from its API keys), with ``--allow-profile-change`` (served in
local mode on purpose, the record untouched), and the team's again (its key still works).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET
from team import bearer

from vera.stack import StackError
from vera.stack.launcher import LaunchedStack, launch, launch_env
from vera.stack.profile import profile_path, recorded_profile
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

TEAM = {"VERA_MCP__JWT_SECRET": AUTH_SECRET, "VERA_MCP__AUTH_ISSUER": AUTH_ISSUER,
        "VERA_MCP__AUTH_AUDIENCE": AUTH_AUDIENCE}


def started(data_dir: Path, up_args: tuple[str, ...] = (), **settings: str
            ) -> AbstractContextManager[LaunchedStack]:
    return launch(data_dir, launch_env(data_dir, **settings), up_args=up_args,
                  ready_timeout=240)


def refused_in_local_mode(data_dir: Path) -> str:
    """Starts the data dir without the team's variables; what `vera up` said on refusing."""
    with pytest.raises(StackError) as refused, started(data_dir):
        pass
    assert read_stack_file(data_dir) is None  # nothing was left serving
    return str(refused.value)


def me(stack: LaunchedStack, key: str) -> int:
    api = read_stack_file(stack.data_dir)["api_url"]  # type: ignore[index]
    return httpx.get(f"{api}/identity/me", headers=bearer(key), timeout=60).status_code


def test_a_team_deployment_restarted_without_its_variables_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with started(data_dir, **TEAM) as team:
        created = team.vera("admin", "create-user", "--name", "root", "--admin",
                            "--data-dir", str(data_dir))
        assert created.returncode == 0, created.stderr
        root = next(line.split(":", 1)[1].strip() for line in created.stdout.splitlines()
                    if line.startswith("api_key"))
        assert me(team, root) == 200
    assert recorded_profile(data_dir) == "remote-authenticated"

    # The operator forgot to export the variables: refused, naming the setting.
    said = refused_in_local_mode(data_dir)
    assert "VERA_MCP__JWT_SECRET" in said and "--allow-profile-change" in said

    # A data dir from before the record: recognised from its accounts.
    profile_path(data_dir).unlink()
    said = refused_in_local_mode(data_dir)
    assert "VERA_MCP__JWT_SECRET" in said

    # On purpose: served in local mode, and the data dir still counts as the team's.
    with started(data_dir, ("--allow-profile-change",)) as local:
        assert read_stack_file(data_dir)["auth_profile"] == "local-dev"  # type: ignore[index]
        assert local.process is not None
    assert recorded_profile(data_dir) is None
    refused_in_local_mode(data_dir)

    # With its variables, the deployment serves as before and records its profile again.
    with started(data_dir, **TEAM) as team:
        assert me(team, root) == 200
    assert recorded_profile(data_dir) == "remote-authenticated"
