"""How a person's `vera` command reaches the REST API (``vera.api_client``): where the API
is, where the key comes from, and where a key is never sent."""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path

import httpx
import pytest

from vera import api_client
from vera.api_client import ApiRefused, ClientStop, add_connection_arguments, open_client
from vera.config import Settings
from vera.local_secret import ensure_secret


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_connection_arguments(parser)
    return parser.parse_args(list(argv))


def _recording(seen: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if status >= 400:
            return httpx.Response(status, json={"error": {"code": "unauthenticated"}})
        return httpx.Response(200, json={"ok": True})

    return httpx.MockTransport(handle)


def test_without_a_stack_file_or_api_url_it_stops_naming_both(tmp_path: Path) -> None:
    with pytest.raises(ClientStop) as stop:
        open_client(_args("--data-dir", str(tmp_path)), Settings())
    assert stop.value.exit_code == api_client.EXIT_UNREACHABLE
    assert "--api-url" in stop.value.message and str(tmp_path.resolve()) in stop.value.message


def test_the_running_stacks_api_url_is_used(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "stack.json").write_text(json.dumps({"api_url": "http://127.0.0.1:18081/",
                                                "pid": os.getpid()}))  # a live stack
    client = open_client(_args("--data-dir", str(tmp_path)), Settings())
    assert client.base_url == "http://127.0.0.1:18081"


def test_the_data_dirs_secret_goes_to_its_own_stack_and_nowhere_else(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("VERA_API_KEY", raising=False)
    secret = ensure_secret(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "stack.json").write_text(json.dumps({"api_url": "http://127.0.0.1:18081",
                                                "pid": os.getpid()}))
    for argv in ((), ("--api-url", "http://127.0.0.1:18081/")):
        seen: list[httpx.Request] = []
        with open_client(_args("--data-dir", str(tmp_path), *argv), Settings(),
                         _recording(seen)) as api:
            api.call("GET", "/identity/me")
        assert seen[0].headers["authorization"] == f"Bearer {secret}"
    # Another listener on this machine (someone else's port) never sees it.
    seen = []
    with open_client(_args("--data-dir", str(tmp_path), "--api-url", "http://127.0.0.1:18082"),
                     Settings(), _recording(seen)) as api:
        api.call("GET", "/identity/me")
    assert "authorization" not in seen[0].headers


@pytest.mark.parametrize(("profile", "sent"), [("local-dev", "secret"),
                                               ("remote-authenticated", "key")])
def test_an_exported_key_gives_way_to_the_secret_only_for_a_local_mode_stack(
        tmp_path: Path, monkeypatch, profile: str, sent: str) -> None:
    monkeypatch.setenv("VERA_API_KEY", "vera_0123456789abcdef_team")
    secret = ensure_secret(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "stack.json").write_text(json.dumps({
        "api_url": "http://127.0.0.1:18081", "pid": os.getpid(), "auth_profile": profile}))
    seen: list[httpx.Request] = []
    with open_client(_args("--data-dir", str(tmp_path)), Settings(), _recording(seen)) as api:
        api.call("GET", "/identity/me")
    expected = secret if sent == "secret" else "vera_0123456789abcdef_team"
    assert seen[0].headers["authorization"] == f"Bearer {expected}"


@pytest.mark.parametrize("url", ["http://vera.example.com", "http://10.0.0.7:8081"])
def test_a_key_is_never_sent_over_plain_http_to_another_host(url: str, monkeypatch) -> None:
    monkeypatch.setenv("VERA_API_KEY", "vera_0123456789abcdef_secret")
    seen: list[httpx.Request] = []
    with open_client(_args("--api-url", url), Settings(), _recording(seen)) as api, \
            pytest.raises(ClientStop) as stop:
        api.call("GET", "/identity/me")
    assert stop.value.exit_code == api_client.EXIT_REFUSED
    assert seen == []
    # On purpose, it is sent; over https or to loopback, always.
    allowed = [("--api-url", url, "--allow-plain-http"), ("--api-url", "https://vera.example.com"),
               ("--api-url", "http://127.0.0.1:8081"), ("--api-url", "http://localhost:8081")]
    for argv in allowed:
        with open_client(_args(*argv), Settings(), _recording(seen)) as api:
            api.call("GET", "/identity/me")
    assert [r.headers["authorization"] for r in seen] == \
        ["Bearer vera_0123456789abcdef_secret"] * len(allowed)


def test_the_key_comes_from_stdin_before_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("VERA_API_KEY", "vera_from_env")
    monkeypatch.setattr("sys.stdin", io.StringIO("vera_from_stdin\n"))
    client = open_client(_args("--api-url", "http://127.0.0.1:1", "--api-key-stdin"), Settings())
    assert client.api_key == "vera_from_stdin"
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(ClientStop):
        open_client(_args("--api-url", "http://127.0.0.1:1", "--api-key-stdin"), Settings())


def test_a_401_asks_for_the_key_once_when_a_terminal_is_attached(monkeypatch) -> None:
    monkeypatch.delenv("VERA_API_KEY", raising=False)
    monkeypatch.setattr(api_client, "_can_prompt", lambda: True)
    monkeypatch.setattr(api_client.getpass, "getpass", lambda prompt: "vera_typed")
    seen: list[httpx.Request] = []
    with open_client(_args("--api-url", "http://127.0.0.1:1"), Settings(),
                     _recording(seen, 401)) as api, pytest.raises(ApiRefused) as refused:
        api.call("GET", "/identity/me")
    assert refused.value.code == "unauthenticated"
    assert [r.headers.get("authorization") for r in seen] == [None, "Bearer vera_typed"]


def test_there_is_no_api_key_flag() -> None:
    with pytest.raises(SystemExit):
        _args("--api-key", "vera_x")


def test_a_secret_others_may_read_stops_the_command_naming_the_file(tmp_path: Path,
                                                                     capsys) -> None:
    from vera.cli import main

    ensure_secret(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "stack.json").write_text(json.dumps({
        "api_url": "http://127.0.0.1:18081", "pid": os.getpid(), "auth_profile": "local-dev"}))
    (tmp_path / "local.secret").chmod(0o640)
    assert main(["curate", "--data-dir", str(tmp_path), "list", "p"]) == 2
    assert "local.secret" in capsys.readouterr().err


def _asking_to_wait(answers: list[httpx.Response], seen: list[httpx.Request]
                    ) -> httpx.MockTransport:
    """Answers each request with the next of ``answers``, the last one for ever after."""
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers[min(len(seen), len(answers)) - 1]

    return httpx.MockTransport(handle)


def _quota_exceeded(retry_after: str | None) -> httpx.Response:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return httpx.Response(429, headers=headers,
                          json={"error": {"code": "quota_exceeded", "bucket": "api_key"}})


def test_an_answer_asking_to_come_back_is_sent_again_after_the_wait_it_names() -> None:
    seen: list[httpx.Request] = []
    slept: list[float] = []
    answers = [_quota_exceeded("7"), httpx.Response(503, headers={"retry-after": "1"}),
               httpx.Response(200, json={"ok": True})]
    client = api_client.ApiClient("http://127.0.0.1:1", transport=_asking_to_wait(answers, seen),
                                  sleep=slept.append)
    with client:
        assert client.call("POST", "/curation/projects/p/ingest", json={"records": []}) == {
            "ok": True}
    assert slept == [7.0, 1.0]
    assert len(seen) == 3 and all(r.method == "POST" for r in seen)


def test_a_refusal_without_retry_after_is_not_sent_again() -> None:
    seen: list[httpx.Request] = []
    slept: list[float] = []
    client = api_client.ApiClient("http://127.0.0.1:1", sleep=slept.append,
                                  transport=_asking_to_wait([_quota_exceeded(None)], seen))
    with client, pytest.raises(ApiRefused) as refused:
        client.call("GET", "/x")
    assert refused.value.code == "quota_exceeded"
    assert (len(seen), slept) == (1, [])


def test_waiting_stops_at_the_budget_and_reports_the_refusal() -> None:
    seen: list[httpx.Request] = []
    slept: list[float] = []
    client = api_client.ApiClient("http://127.0.0.1:1", sleep=slept.append,
                                  transport=_asking_to_wait([_quota_exceeded("60")], seen))
    with client, pytest.raises(ApiRefused) as refused:
        client.call("GET", "/x")
    assert refused.value.status == 429
    assert sum(slept) <= api_client.RETRY_BUDGET_SECONDS
    assert sum(slept) + 60 > api_client.RETRY_BUDGET_SECONDS  # it waited as long as it may
    assert len(seen) == len(slept) + 1


@pytest.mark.parametrize(("header", "expected"), [
    ("3", 3.0), ("0", 0.0), ("100000", api_client.RETRY_AFTER_CAP_SECONDS),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("soon", None)])
def test_retry_after_reads_seconds_and_dates_within_the_cap(header: str,
                                                            expected: float | None) -> None:
    assert api_client.retry_after(httpx.Response(429, headers={"retry-after": header})) \
        == expected


def test_polls_start_quick_and_settle_at_the_paced_interval() -> None:
    delays = api_client.poll_delays()
    assert [next(delays) for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]


def test_an_unavailable_api_is_waited_for_a_while_then_reported() -> None:
    seen: list[httpx.Request] = []
    slept: list[float] = []
    away = httpx.Response(503, headers={"retry-after": "2"},
                          json={"error": {"code": "unavailable", "reason": "database_unreachable"}})
    client = api_client.ApiClient("http://127.0.0.1:1", sleep=slept.append,
                                  transport=_asking_to_wait([away], seen))
    with client, pytest.raises(ApiRefused) as refused:
        client.call("GET", "/x")
    assert refused.value.code == "unavailable"
    assert sum(slept) <= api_client.UNAVAILABLE_BUDGET_SECONDS < sum(slept) + 2


def test_a_stack_restarting_its_database_is_ridden_through() -> None:
    seen: list[httpx.Request] = []
    slept: list[float] = []
    away = httpx.Response(503, headers={"retry-after": "2"},
                          json={"error": {"code": "unavailable"}})
    client = api_client.ApiClient("http://127.0.0.1:1", sleep=slept.append,
                                  transport=_asking_to_wait([away] * 3 + [
                                      httpx.Response(200, json={"indexed_position": 7})], seen))
    with client:
        assert client.call("GET", "/x") == {"indexed_position": 7}
    assert slept == [2.0, 2.0, 2.0]
