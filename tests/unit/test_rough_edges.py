"""Issue 41's rough edges, each where a person meets it: an operator command that cannot
find its stack names --data-dir; doctor says the stack is down, or the token was refused,
with the command that fixes it (not an exception's class name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera import cli
from vera.integrations import doctor
from vera.stack.ports import free_port


def test_vera_admin_without_a_stack_names_the_data_dir_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["admin", "create-user", "--name", "root", "--admin",
                     "--data-dir", str(tmp_path)])
    said = capsys.readouterr().err
    assert code == 1
    assert "--data-dir" in said and str(tmp_path.resolve()) in said
    assert "unavailable" not in said


def test_doctor_says_the_stack_is_down_and_how_to_start_it() -> None:
    finding = doctor._tools_finding(f"http://127.0.0.1:{free_port()}/mcp", None)
    assert not finding.ok
    assert "vera up" in finding.detail and "ExceptionGroup" not in finding.detail


def test_doctor_names_vera_connect_when_the_token_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def refused(url: str, token: str | None) -> list[str]:
        raise RuntimeError("401")

    monkeypatch.setattr(doctor, "_tools", refused)
    monkeypatch.setattr(doctor, "credential_refusal",
                        lambda url, token: "rejected: the server refuses the token")
    finding = doctor._tools_finding("http://127.0.0.1:1/mcp", "t")
    assert not finding.ok and "vera connect" in finding.detail


def test_the_mcp_clients_request_lines_stay_out_of_a_commands_output(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`vera doctor` lists tools with the official MCP client, whose HTTP library logs
    every request at INFO: a person reads findings, not raw HTTP lines."""
    import logging

    from vera.logs import configure_logging

    configure_logging("INFO", "doctor")
    logging.getLogger("httpx2").info('HTTP Request: POST http://127.0.0.1:1/mcp "HTTP/1.1 200 OK"')
    logging.getLogger("vera.integrations").info("kept")
    said = capsys.readouterr().err
    assert "HTTP Request" not in said and "kept" in said
