"""A harvested fact as the ingest record it is loaded as: its source id the same at every
commit, its URI naming the commit in the host's layout, a superseded decision's validity
closed at the commit only when the record dates it."""

from __future__ import annotations

from datetime import UTC, datetime

from vera.harvest.facts import DECISION, Fact
from vera.harvest.records import fact_record, file_uri, source_id, source_record

COMMITTED = datetime(2026, 3, 1, tzinfo=UTC)


def _decision(valid_from: datetime | None) -> Fact:
    return Fact(subject="1. Use PostgreSQL", predicate="decided", object="PostgreSQL",
                path="docs/adr/0001.md", start=11, end=11, slot="decided",
                document_type=DECISION, valid_from=valid_from, until_commit=True,
                quote="PostgreSQL", evidence="We will use PostgreSQL.")


def test_the_source_id_is_stable_and_the_uri_names_the_commit_in_the_hosts_layout() -> None:
    assert source_id("github.com/acme/shop", "a/b.toml") == "github.com/acme/shop/a/b.toml"
    assert file_uri("github.com/acme/shop", "c0ffee", "a/b.toml") == \
        "https://github.com/acme/shop/blob/c0ffee/a/b.toml"
    assert file_uri("gitlab.example.org/team/shop", "c0ffee", "a.toml") == \
        "https://gitlab.example.org/team/shop/-/blob/c0ffee/a.toml"
    record = source_record("github.com/acme/shop", "c0ffee", COMMITTED, "a/b.toml")
    assert (record["id"], record["observed_at"]) == ("github.com/acme/shop/a/b.toml",
                                                      COMMITTED.isoformat())


def test_a_superseded_decision_is_closed_at_the_commit_only_when_dated() -> None:
    dated = fact_record(_decision(datetime(2025, 1, 2, tzinfo=UTC)), "github.com/acme/shop",
                        "main", COMMITTED)
    assert dated is not None
    assert (dated["valid_from"], dated["valid_to"]) == (
        datetime(2025, 1, 2, tzinfo=UTC).isoformat(), COMMITTED.isoformat())
    assert (dated["locator"], dated["code_path"], dated["branch"]) == (
        "L11", "docs/adr", "main")
    assert fact_record(_decision(None), "github.com/acme/shop", "main", COMMITTED) is None
