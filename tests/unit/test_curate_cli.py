"""`vera curate list` shows pending proposals and, after them, the attempts refused as
conflicted with the facts they contradict (a unit test of the CLI over a fake REST API)."""

from __future__ import annotations

import argparse
import json

import httpx
import pytest

from vera.commands import curate
from vera.config import Settings

PENDING = {"project_id": "p", "proposals": [], "next_page_token": None, "total": 0}
CONFLICTED = {
    "project_id": "p",
    "attempts": [
        {
            "attempt_id": "a1",
            "subject": "payments-api",
            "predicate": "uses_database",
            "object": "PostgreSQL 16",
            "contradicted_fact_keys": ["fk-pg14"],
        }
    ],
    "next_page_token": "tok2",
    "total": 3,
}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    curate.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["curate", "--api-url", "http://api", *argv])


def _api(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/conflicted-attempts"):
            return httpx.Response(200, json=CONFLICTED)
        return httpx.Response(200, json=PENDING)

    return httpx.MockTransport(handle)


def test_list_shows_conflicted_attempts_with_the_contradicted_fact(capsys) -> None:
    seen: list[httpx.Request] = []
    args = _args("list", "payments", "--conflicted-page-token", "tok1")
    assert curate.run(args, Settings(), transport=_api(seen)) == 0
    out = capsys.readouterr().out
    assert "3 conflicted attempt(s)" in out
    assert "payments-api | uses_database | PostgreSQL 16  (contradicts: fk-pg14)" in out
    assert "--conflicted-page-token tok2" in out
    assert [r.url.path for r in seen] == [
        "/curation/projects/payments/proposals",
        "/curation/projects/payments/conflicted-attempts",
    ]
    assert seen[1].url.params["page_token"] == "tok1"


def test_list_json_carries_both_lists(capsys) -> None:
    assert curate.run(_args("--json", "list", "payments"), Settings(), transport=_api([])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == 0 and data["conflicted_attempts"] == CONFLICTED


@pytest.mark.parametrize("failing", ["/proposals", "/conflicted-attempts"])
def test_a_refused_listing_exits_2(capsys, failing: str) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(failing):
            return httpx.Response(403, json={"error": {"code": "unauthorized"}})
        return httpx.Response(200, json=PENDING)

    args = _args("list", "payments")
    assert curate.run(args, Settings(), transport=httpx.MockTransport(handle)) == 2
    assert "unauthorized" in capsys.readouterr().err


def test_a_project_nobody_can_read_is_named_in_the_refusal(capsys) -> None:
    # A local user proposing into a project no ingest created yet saw only the bare code.
    refused = httpx.Response(404, json={"error": {"code": "project_out_of_scope"}})
    args = _args("list", "nosuch")
    assert curate.run(args, Settings(), transport=httpx.MockTransport(lambda _: refused)) == 2
    err = capsys.readouterr().err
    assert "project nosuch:" in err and "(project_out_of_scope)" in err


@pytest.mark.parametrize("state", ["disputed", "FACT_STATE_DISPUTED"])
def test_verify_says_the_state_the_fact_is_in_whichever_spelling_the_api_answers(
        capsys, state: str) -> None:
    """REST version 2 spells "disputed"; a deployment still on version 1's spelling
    (VERA_API__VALUE_SPELLING=protobuf) answers "FACT_STATE_DISPUTED": the same words."""
    verified = {"fact": {"fact_key": "fk-1", "scope_id": "p", "state": state},
                "proposal": {"fact_key": "fk-0", "state": "superseded"},
                "already_active": False, "change_position": 7}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=verified))
    assert curate.run(_args("verify", "payments", "fk-0"), Settings(), transport=transport) == 0
    assert capsys.readouterr().out.strip() == "verified: fk-1 is disputed in project p"
