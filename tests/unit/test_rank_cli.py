"""`vera rank`'s exit codes: a stack that cannot be reached is 1 (with the hint), a refused
argument is 2, and the arguments parse as documented."""

from __future__ import annotations

import pytest

from vera import cli
from vera.stack.ports import free_port


def _closed_port() -> str:
    return f"127.0.0.1:{free_port()}"


def test_an_unreachable_stack_exits_1(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("VERA_SERVICES__RETRIEVAL", _closed_port())
    monkeypatch.setenv("VERA_RPC__RETRIEVAL_DEADLINE_SECONDS", "2")
    assert cli.main(["rank", "status", "--data-dir", str(tmp_path)]) == 1
    assert "unavailable" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["rank", "fit", "--since", "yesterday"],
        ["rank", "fit", "--max-rows", "many"],
        ["rank", "fit", "--all", "--project", "payments"],
        ["rank", "status", "--all"],
    ],
)
def test_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
