"""`vera --version` names the installed release, for bug reports and upgrade checks."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from vera import cli


def test_version_prints_the_installed_release(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.split() == ["vera", version("vera-memory")]
