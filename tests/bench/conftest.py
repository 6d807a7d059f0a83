"""A bench run inside a test keeps its record in the test's folder, never over the committed
bench/records/ the page is generated from."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import record


@pytest.fixture(autouse=True)
def records_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "records"
    monkeypatch.setattr(record, "RECORDS", folder)
    return folder
