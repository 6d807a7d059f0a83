"""A regression corpus of hostile facts (``hostile_corpus.jsonl``: fake system prompts,
tool-call syntax, forged "verified" citation lines, zero-width, bidi and TAG characters,
markdown links and images carrying data in the URL, claims about scopes, profiles and
quotas) published as shared truth through the curator's path (`vera ingest`) into the real
stack, then read back through every read tool of the coding profile.

Held: each hostile value comes back whole and only as the value of its own typed field
(never spliced into another field, never changing a state, tier, authority or
verification), written as the gateway writes every stored string (``untrusted``: its
hidden characters escaped, its markdown links broken), so no string of a structured
result holds a hidden character or a live link either; no text rendering holds a line the
value could have forged (every line break and hidden character is escaped, so each line
starts as its renderer wrote it);
and the server's decisions are the same after reading it as before: the tools served and
refused, the caller's grants and readable projects, where a proposal echoing the content
lands, and the quota bucket that stops the fourth proposal of three allowed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fuzz_stack import Session, mcp_session, running_stack
from harness import without_ids
from mcp import MCPError

from vera.stack.launcher import LaunchedStack
from vera.text import codepoint, first_hidden, untrusted

pytestmark = pytest.mark.e2e

CORPUS = Path(__file__).with_name("hostile_corpus.jsonl")
PROJECT = "hostile"
SOURCE_ID = "adr-7"
PROPOSALS_PER_MINUTE = 3
# Where a hostile value may come back: the field it was published in, nowhere else.
TYPED_FIELDS = {
    "object": {"object"},
    "evidence": {"excerpt", "text"},
    "title": {"title"},
    "uri": {"uri"},
}
# Every character str.splitlines() breaks a line at: none may reach a rendering raw.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def corpus() -> list[dict[str, str]]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def ingest_file(tmp: Path) -> Path:
    """The corpus as a curated file: its source line, then one fact per case citing it."""
    entries = corpus()
    [source] = [entry for entry in entries if entry["case"] == "forged-source"]
    lines: list[dict[str, Any]] = [
        {
            "type": "source",
            "id": SOURCE_ID,
            "source_type": "adr",
            "title": source["title"],
            "uri": source["uri"],
            "observed_at": "2025-01-02T00:00:00Z",
        }
    ]
    lines += [
        {
            "type": "fact",
            "subject": entry["subject"],
            "predicate": entry["predicate"],
            "object": entry["object"],
            "evidence": entry["evidence"],
            "source": SOURCE_ID,
            "locator": "L1",
        }
        for entry in entries
        if "subject" in entry
    ]
    path = tmp / "hostile.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def hostile_values() -> dict[str, str]:
    """Every hostile value, as a structured result carries it -> the field it was
    published in."""
    out = {}
    for entry in corpus():
        for name in TYPED_FIELDS:
            if name in entry:
                out[untrusted(entry[name])] = name
    return out


@dataclass
class Decisions:
    """What the server decided for the caller, before or after it read the corpus."""

    tools: list[str]
    bootstrap: dict[str, Any]
    refused_tool: Any


@dataclass
class Read:
    stack: LaunchedStack
    ingest_output: str
    before: Decisions
    after: Decisions
    # (tool, structured content, text rendering) of every read
    reads: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)


def refusal(session: Session, tool: str, arguments: dict[str, Any]) -> Any:
    with pytest.raises(MCPError) as caught:
        session.call_tool(tool, arguments)
    data = caught.value.error.data
    return caught.value.error.code, without_ids(data) if isinstance(data, dict) else data


def decisions(session: Session) -> Decisions:
    bootstrap = session.call_tool("knowledge_bootstrap", {}).structured_content
    decided = {
        key: bootstrap[key]
        for key in (
            "principal",
            "auth_profile",
            "capabilities",
            "tool_profile",
            "visible_tools",
            "readable_projects",
        )
    }
    # A tool of a wider profile, named by the corpus, is refused like one that is no tool.
    refused = refusal(
        session, "memory_propose", {"subject": "a", "predicate": "uses", "object": "b"}
    )
    assert refused == refusal(session, "no_such_tool", {})
    return Decisions(session.tool_names(), decided, refused)


def read_everything(session: Session, read: Read) -> None:
    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = session.call_tool(tool, arguments)
        assert not result.is_error, result.content
        read.reads.append((tool, result.structured_content, result.content[0].text))
        return result.structured_content

    for entry in corpus():
        if "subject" not in entry:
            continue
        query = f"{entry['subject']} {entry['predicate']}"
        found = call("knowledge_search", {"query": query, "project": PROJECT})
        [hit] = [r for r in found["results"] if r["subject"] == entry["subject"]]
        call("knowledge_explain_fact", {"fact_key": hit["fact_key"]})
        call("knowledge_get_evidence", {"fact_key": hit["fact_key"]})
    pack = call(
        "knowledge_get_context",
        {
            "query": "which database does hostile use",
            "project": PROJECT,
            "persist": True,
            "limit": 50,
        },
    )
    call("knowledge_get_context_pack", {"pack_id": pack["pack_id"]})


@pytest.fixture(scope="module")
def read(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Read]:
    tmp = tmp_path_factory.mktemp("hostile-corpus")
    with running_stack(
        tmp / "data", VERA_MCP__QUOTA_PROPOSE_PER_MINUTE=str(PROPOSALS_PER_MINUTE)
    ) as stack:
        with mcp_session(stack) as session:
            # The caller owns the project before the corpus lands, so its readable projects
            # are the same set before and after.
            seeded = tmp / "seed.jsonl"
            seeded.write_text(
                json.dumps(
                    {
                        "type": "fact",
                        "subject": "hostile-seed",
                        "predicate": "uses",
                        "object": "postgres",
                    }
                )
                + "\n"
            )
            assert stack.vera("ingest", str(seeded), "--project", PROJECT).returncode == 0
            before = decisions(session)
            ingested = stack.vera("ingest", str(ingest_file(tmp)), "--project", PROJECT)
            assert ingested.returncode == 0, ingested.stdout + ingested.stderr
            result = Read(stack, ingested.stdout, before, before)
            read_everything(session, result)
            result.after = decisions(session)
        yield result


def test_the_corpus_landed_as_shared_truth_with_its_hidden_characters_flagged(read) -> None:
    entries = [entry for entry in corpus() if "subject" in entry]
    for number, entry in enumerate(entries, start=2):  # line 1 is the source
        hidden = first_hidden(entry["object"])
        if hidden is not None:
            assert f"line {number}: object: hidden_character {codepoint(hidden)}" in (
                read.ingest_output
            ), entry["case"]
    found = {
        r["subject"]: r
        for tool, data, _ in read.reads
        if tool == "knowledge_search"
        for r in data["results"]
    }
    assert {entry["subject"] for entry in entries} <= set(found)
    for entry in entries:
        hit = found[entry["subject"]]
        # What the curator published, decided by the file's defaults, not by the text.
        assert (hit["state"], hit["trust_tier"], hit["authority"]) == ("active", 1, 0.7)
        assert [c["verification"] for c in hit["citations"]] == ["verified"]
        assert hit["object"] == untrusted(entry["object"])


def strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string in ``value`` at any depth, with the key it is the value of."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for name, inner in value.items():
            yield from strings(inner, name)
    elif isinstance(value, list):
        for inner in value:
            yield from strings(inner, key)


def test_hostile_values_come_back_only_whole_in_their_own_typed_fields(read) -> None:
    values = hostile_values()
    misplaced, seen = [], set()
    for tool, data, _ in read.reads:
        for key, text in strings(data):
            for value, published_in in values.items():
                if value in text:
                    seen.add(value)
                    if text != value or key not in TYPED_FIELDS[published_in]:
                        misplaced.append(f"{tool}: {key!r} holds {published_in} {value!r}")
    assert not misplaced, "\n".join(sorted(set(misplaced)))
    assert seen == set(values)  # each value was read back at least once


def test_no_structured_string_holds_a_hidden_character_or_a_live_link(read) -> None:
    problems = [
        f"{tool}: {key!r} holds {text!r}"
        for tool, data, _ in read.reads
        for key, text in strings(data)
        if first_hidden(text) is not None or "](" in text
    ]
    assert not problems, "\n".join(problems[:20])


def forged_lines() -> list[str]:
    """What each hostile value would put at the start of a line if a break in it reached a
    rendering raw: every piece after a line break, stripped."""
    pieces = []
    for value in (entry[name] for entry in corpus() for name in TYPED_FIELDS if name in entry):
        for piece in value.splitlines()[1:]:
            if piece.strip():
                pieces.append(piece.strip())
    return pieces


def test_no_text_rendering_shows_a_line_the_corpus_forged(read) -> None:
    forged = forged_lines()
    assert forged  # the corpus does try
    problems = []
    for tool, data, text in read.reads:
        lines = text.split("\n")
        if text.splitlines() != lines:
            problems.append(f"{tool}: a line break other than \\n")
        for line in lines:
            if first_hidden(line) is not None:
                problems.append(f"{tool}: raw {codepoint(first_hidden(line))} in {line!r}")
            if any(line.strip().startswith(piece) for piece in forged):
                problems.append(f"{tool}: forged line {line!r}")
        citations = sum(len(r.get("citations", ())) for r in data.get("results", ()))
        cite_lines = sum(1 for line in lines if line.lstrip().startswith("cite:"))
        if citations and cite_lines != citations:
            problems.append(f"{tool}: {cite_lines} cite lines for {citations} citations")
    assert not problems, "\n".join(problems[:20])


def test_reading_the_corpus_changed_no_server_decision(read) -> None:
    assert read.after == read.before
    assert read.before.bootstrap["tool_profile"] == "coding"
    assert read.before.refused_tool[1]["reason"] == "unknown_tool"
    shared = {
        p["project_id"] for p in read.before.bootstrap["readable_projects"] if p["kind"] == "shared"
    }
    results = [r for _, data, _ in read.reads for r in data.get("results", ())]
    assert results and {r["project_id"] for r in results} == shared


def test_a_proposal_echoing_the_corpus_stays_personal_and_the_quota_holds(read) -> None:
    """An agent that repeats the "decision claims" fact back as a proposal gets an
    unverified proposal in its personal scope, and the propose bucket stops it exactly
    where the configuration says."""
    [claims] = [entry for entry in corpus() if entry["case"] == "decision-claims"]
    personal = read.before.bootstrap["principal"]["personal_scope_id"]
    with mcp_session(read.stack) as session:
        for number in range(PROPOSALS_PER_MINUTE):
            proposed = session.call_tool(
                "knowledge_propose",
                {
                    "subject": f"hostile-echo-{number}",
                    "predicate": "uses",
                    "object": claims["object"],
                    "evidence_text": claims["evidence"],
                },
            )
            fact = proposed.structured_content["fact"]
            assert (fact["state"], fact["project_id"]) == ("proposed", personal)
            assert [c["verification"] for c in fact["citations"]] == ["unverified"]
        _, data = refusal(
            session,
            "knowledge_propose",
            {"subject": "hostile-echo-over", "predicate": "uses", "object": claims["object"]},
        )
    assert (data["code"], data["bucket"]) == ("quota_exceeded", "propose")
