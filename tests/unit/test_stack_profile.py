"""The profile a data dir is served in (vera.stack.profile): a data dir that held an
authenticated deployment is never served in local mode unless the operator says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera.config import Settings
from vera.stack import StackError
from vera.stack import profile as profile_module
from vera.stack.profile import admit_profile, record_profile, recorded_profile

LOCAL = Settings()
TEAM = Settings(mcp={"jwt_secret": "team-signing-secret-0123456789abcdef0123"})


@pytest.fixture
def accounts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What the data dir's database holds: [True] when it has accounts."""
    held = [False]

    async def holds_accounts(dsn: str) -> bool:
        return held[0]

    monkeypatch.setattr(profile_module, "holds_accounts", holds_accounts)
    return held


async def test_a_new_data_dir_records_the_profile_it_is_served_in(
        tmp_path: Path, accounts: list[bool]) -> None:
    await admit_profile(LOCAL, tmp_path, "dsn", allow_change=False)
    assert recorded_profile(tmp_path) == "local-dev"
    # A local data dir may become a team's.
    await admit_profile(TEAM, tmp_path, "dsn", allow_change=False)
    assert recorded_profile(tmp_path) == "remote-authenticated"


async def test_an_authenticated_data_dir_is_refused_in_local_mode(
        tmp_path: Path, accounts: list[bool]) -> None:
    record_profile(tmp_path, "remote-authenticated")
    with pytest.raises(StackError, match="VERA_MCP__JWT_SECRET"):
        await admit_profile(LOCAL, tmp_path, "dsn", allow_change=False)
    await admit_profile(LOCAL, tmp_path, "dsn", allow_change=True)
    assert recorded_profile(tmp_path) == "remote-authenticated"  # on purpose, this once


async def test_a_data_dir_from_before_the_record_is_recognised_by_its_accounts(
        tmp_path: Path, accounts: list[bool]) -> None:
    accounts[0] = True
    with pytest.raises(StackError):
        await admit_profile(LOCAL, tmp_path, "dsn", allow_change=False)
    assert recorded_profile(tmp_path) is None
    await admit_profile(TEAM, tmp_path, "dsn", allow_change=False)
    assert recorded_profile(tmp_path) == "remote-authenticated"


async def test_a_local_data_dir_keeps_its_accounts_once_its_profile_is_recorded(
        tmp_path: Path, accounts: list[bool]) -> None:
    record_profile(tmp_path, "local-dev")
    accounts[0] = True  # users made in local mode, after the record
    await admit_profile(LOCAL, tmp_path, "dsn", allow_change=False)
    assert recorded_profile(tmp_path) == "local-dev"
