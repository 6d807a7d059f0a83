"""The repository and code-path hints of knowledge_get_context / knowledge_search are
identities, never raw text: a raw remote binds like its canonical form (the identity facts
are stored under), and a persisted pack holds no credentials and no local paths."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from harness import mcp_client

from vera.repository_identity import canonicalize, relative_code_path
from vera.services.retrieval.domain import Fact
from vera.services.retrieval.pipeline.retriever import binding_boost
from vera.services.retrieval.serving.convert import filters_from_proto

CANONICAL = "github.com/acme/payments"
RAW_REMOTES = [
    "git@github.com:acme/payments.git",
    "https://user:ghp_0123456789abcdefghijklmnopqrstuvwxyz@github.com/acme/payments?x=1#top",
    "ssh://git@GitHub.com:2222/acme/payments.git/",
]
# How ingest stores a fact's repository: the same canonical identity.
BOUND = Fact(
    fact_key="f",
    version_id="v",
    scope_id="s",
    subject="payments-api",
    predicate="p",
    object="o",
    repository=canonicalize("https://github.com/acme/payments"),
    code_path="services/billing",
)


@pytest.mark.parametrize("remote", RAW_REMOTES)
@pytest.mark.parametrize("tool", ["knowledge_get_context", "knowledge_search"])
async def test_a_raw_remote_gets_the_binding_boost(gateway, fakes, tool, remote):
    rpc = "AssembleContext" if tool == "knowledge_get_context" else "Search"
    async with mcp_client(gateway.url) as client:
        result = await client.call_tool(
            tool, {"query": "q", "repository": remote, "code_path": "./services//billing/api"}
        )
    assert not result.is_error
    sent = fakes.rec.last(rpc).filters
    assert (sent.repository, sent.code_path) == (CANONICAL, "services/billing/api")
    # Retrieval's own rule: repository and code-path boosts both apply to the bound fact.
    unbound = filters_from_proto(type(sent)())
    assert binding_boost(BOUND, filters_from_proto(sent)) > binding_boost(BOUND, unbound)


@pytest.mark.parametrize(
    ("repository", "code_path"),
    [
        ("/home/alice/src/payments", "/home/alice/src/payments/services/billing"),
        ("file:///home/alice/payments", "C:\\Users\\alice\\payments"),
        ("not a remote", "~/payments/../secrets"),
    ],
)
async def test_local_paths_are_dropped_not_sent(gateway, fakes, repository, code_path):
    async with mcp_client(gateway.url) as client:
        result = await client.call_tool(
            "knowledge_get_context",
            {"query": "q", "repository": repository, "code_path": code_path},
        )
    assert not result.is_error
    sent = fakes.rec.last("AssembleContext").filters
    assert (sent.repository, sent.code_path) == ("", "")
    assert result.structured_content["request"]["repository"] is None
    assert result.structured_content["request"]["code_path"] is None


async def test_a_persisted_pack_holds_no_credentials_or_local_paths(gateway, fakes):
    token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
    arguments = {
        "query": "which database?",
        "persist": True,
        "repository": f"https://ci-bot:{token}@github.com/acme/payments.git?ref=main",
        "code_path": "/home/alice/src/payments/services/billing",
    }
    async with mcp_client(gateway.url) as client:
        persisted = (await client.call_tool("knowledge_get_context", arguments)).structured_content
        pack_id = persisted["pack_id"]
        read_back = (
            await client.call_tool("knowledge_get_context_pack", {"pack_id": pack_id})
        ).structured_content
    stored = json.dumps(json_format.MessageToDict(fakes.snapshot.packs[pack_id]))
    for leaked in (token, "ci-bot", "ref=main", "/home/alice"):
        assert leaked not in stored
    assert read_back["request"]["repository"] == CANONICAL
    assert read_back["request"]["code_path"] is None


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("services/billing", "services/billing"),
        ("./services//billing/", "services/billing"),
        ("src\\billing\\api.py", "src/billing/api.py"),
        ("docs/On Call.md", "docs/On Call.md"),
        ("/home/alice/src/x", None),
        ("~/src/x", None),
        ("C:\\work\\x", None),
        ("\\\\host\\share\\x", None),
        ("file:///srv/x", None),
        ("a/../../etc", None),
        (".", None),
        ("a\nb", None),
    ],
)
def test_relative_code_path(path, relative):
    assert relative_code_path(path) == relative
