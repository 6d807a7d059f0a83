"""What `vera backup` and `vera restore` refuse before touching anything
(vera.stack.backup); the round trip itself is tests/e2e/test_backup_restore.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vera.stack import StackError
from vera.stack.backup import BACKUP_FORMAT, MANIFEST_FILE, backup, restore


def test_a_dir_without_a_deployment_is_not_backed_up(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="--data-dir"):
        backup(tmp_path / "nothing", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_a_backup_never_lands_in_a_directory_holding_something(tmp_path: Path) -> None:
    (tmp_path / "data" / "postgres").mkdir(parents=True)
    (tmp_path / "data" / "local.secret").write_text("s")
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "old").write_text("x")
    with pytest.raises(StackError, match="not empty"):
        backup(tmp_path / "data", tmp_path / "dest")


@pytest.mark.parametrize("manifest", [None, {"format": BACKUP_FORMAT + 1},
                                      {"format": BACKUP_FORMAT}])
def test_what_is_not_a_whole_backup_is_not_restored(tmp_path: Path,
                                                    manifest: dict | None) -> None:
    source = tmp_path / "backup"
    source.mkdir()
    if manifest is not None:
        (source / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(StackError, match=str(source)):
        restore(source, tmp_path / "new")
    assert not (tmp_path / "new").exists()
